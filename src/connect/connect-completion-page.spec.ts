import { describe, expect, it } from '@jest/globals';
import { completionPage } from './connect-completion-page.js';

describe('the completion page', () => {
  it('keeps every value inside its script, whatever it holds', () => {
    const html = completionPage({
      outcome: { status: 'error', error: 'access_denied' },
      nonce: 'n0nce',
      target: { origin: 'https://partner.example', fallbackUrl: 'https://partner.example/back?x=</script><script>alert(1)</script>\u2028' },
    });
    expect(html.match(/<\/script/gi)).toHaveLength(1);
    expect(html.match(/<script/gi)).toHaveLength(1);
    expect(html).toContain('\\u003c/script>\\u003cscript>alert(1)\\u003c/script>\\u2028');
    expect(html).toContain('window.opener.postMessage(message, origin)');
    expect(html).toContain('var origin = "https://partner.example";');
  });

  it('has no script at all when there is no origin to post to', () => {
    const html = completionPage({
      outcome: { status: 'connected', connectionId: '6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10' },
      nonce: 'n',
      target: null,
    });
    expect(html).not.toMatch(/<script|postMessage/);
    expect(html).toContain('no longer allowed');
  });
});
