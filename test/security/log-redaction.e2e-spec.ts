import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { authorizeAtSandbox, newTenant, openCallback } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * A connect link's token is a bearer secret (whoever opens the link connects that user): it must not
 * reach a log line, whatever form the request takes. Checked on the real log lines the app writes.
 */

interface LogLine {
  msg?: string;
  req?: { id?: string; url?: string; headers?: Record<string, unknown> };
  res?: { statusCode?: number; headers?: Record<string, unknown> };
}

describe('connect-link tokens and OAuth states never reach a log line', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  async function connectLink(userId: string): Promise<{ url: string; token: string }> {
    const res = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId, returnUrl: 'http://localhost:5173/done' },
    });
    expect(res.status).toBe(201);
    return { url: res.body.connectUrl, token: res.body.connectUrl.split('/connect/')[1] };
  }

  /** The access-log line of the request that got this x-request-id (pino-http writes it when the answer ends). */
  async function accessLine(requestId: string | null): Promise<LogLine> {
    expect(requestId).toBeTruthy();
    for (let i = 0; i < 50; i++) {
      const line = t.logs.map((l) => JSON.parse(l) as LogLine).find((l) => l.req?.id === requestId && l.msg === 'request completed');
      if (line) return line;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`no access-log line for request ${requestId}`);
  }

  const forms: Array<{ label: string; path: (token: string) => string; headers?: Record<string, string> }> = [
    { label: 'the link as given', path: (tok) => `/connect/${tok}` },
    { label: 'upper case', path: (tok) => `/CONNECT/${tok}` },
    { label: 'mixed case', path: (tok) => `/Connect/${tok}` },
    { label: 'a trailing slash', path: (tok) => `/connect/${tok}/` },
    { label: 'a doubled slash', path: (tok) => `/connect//${tok}` },
    { label: 'a query string', path: (tok) => `/connect/${tok}?utm_source=mail&state=abc` },
    { label: 'an encoded slash', path: (tok) => `/connect%2F${tok}` },
    { label: 'a browser asking for HTML', path: (tok) => `/connect/${tok}`, headers: { accept: 'text/html' } },
  ];

  it.each(forms.map((f) => [f.label, f] as const))(
    '%s: the access line shows /connect/[redacted], the token appears nowhere',
    async (_label, form) => {
      const { token } = await connectLink(`u-log-${form.label.replace(/\W/g, '')}`);
      const res = await fetch(`${t.url}${form.path(token)}`, { redirect: 'manual', headers: form.headers });
      const line = await accessLine(res.headers.get('x-request-id'));
      expect(line.req?.url).toMatch(/\/connect(\/|%2F)+\[redacted\]/i);
      expect(t.logs.join('\n')).not.toContain(token);
    },
  );

  it('a page requested from a connect page (its Referer) and the redirect to the authorize page (its state) are redacted too', async () => {
    const { url, token } = await connectLink('u-log-referer');
    const opened = await fetch(url, { redirect: 'manual' });
    expect(opened.status).toBe(302);
    const state = new URL(opened.headers.get('location')!).searchParams.get('state')!;
    const redirectLine = await accessLine(opened.headers.get('x-request-id'));
    expect(String(redirectLine.res?.headers?.location)).toContain('state=%5Bredacted%5D');

    const again = await fetch(url, { headers: { accept: 'text/html' } }); // single use: the error page
    expect(again.status).toBe(400);
    expect(again.headers.get('referrer-policy')).toBe('no-referrer');
    const favicon = await fetch(`${t.url}/favicon.ico`, { headers: { referer: url } });
    const faviconLine = await accessLine(favicon.headers.get('x-request-id'));
    expect(faviconLine.req?.headers?.referer).toBe(`${t.url}/connect/[redacted]`);

    const all = t.logs.join('\n');
    expect(all).not.toContain(token);
    expect(all).not.toContain(state);
  });

  it('a whole flow (link, consent, callback) leaves no token, state or code in the logs', async () => {
    const { url, token } = await connectLink('u-log-flow');
    const callback = await authorizeAtSandbox(url, 'alice', 'approve');
    const back = await openCallback(callback);
    expect(back.status).toBe(302);
    const params = new URL(callback.url).searchParams;
    const all = t.logs.join('\n');
    for (const secret of [token, params.get('state')!, params.get('code')!, callback.cookie.split('=')[1]]) {
      expect([secret, all.split('\n').filter((l) => l.includes(secret))]).toEqual([secret, []]);
    }
    const callbackLine = await accessLine(back.headers.get('x-request-id'));
    expect(callbackLine.req?.url).toBe('/oauth/callback?code=%5Bredacted%5D&state=%5Bredacted%5D');
  });
});
