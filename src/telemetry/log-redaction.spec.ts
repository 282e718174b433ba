import { describe, expect, it } from '@jest/globals';
import { redactSecrets, redactUrl } from './log-redaction.js';

describe('redactUrl', () => {
  it.each([
    ['/connect/abc_DEF-123', '/connect/[redacted]'],
    ['/CONNECT/abc', '/CONNECT/[redacted]'],
    ['//connect//abc/', '//connect//[redacted]'],
    ['/connect/abc?utm=x', '/connect/[redacted]?utm=x'],
    ['/connect%2Fabc', '/connect%2F[redacted]'],
    ['/connect/abc#frag', '/connect/[redacted]#frag'],
    ['http://host:1/connect/abc', 'http://host:1/connect/[redacted]'],
    ['/oauth/callback?code=c1&state=s1', '/oauth/callback?code=%5Bredacted%5D&state=%5Bredacted%5D'],
    ['/v1/tenants/acme/connections', '/v1/tenants/acme/connections'],
    ['/v1/tenants/acme/connect-sessions', '/v1/tenants/acme/connect-sessions'],
  ])('%s → %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});

describe('redactSecrets', () => {
  it('logs URL-valued fields through redactUrl', () => {
    expect(
      redactSecrets({
        res: { headers: { location: 'http://up/oauth/authorize?state=s&client_id=c' } },
        req: { headers: { referer: 'http://me/connect/tok' } },
      }),
    ).toEqual({
      res: { headers: { location: 'http://up/oauth/authorize?state=%5Bredacted%5D&client_id=c' } },
      req: { headers: { referer: 'http://me/connect/[redacted]' } },
    });
  });
});
