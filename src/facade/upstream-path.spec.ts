import { describe, expect, it } from '@jest/globals';
import { matchRoute, type RouteMatch } from './facade-routes.js';
import { upstreamCall } from './facade-door.js';
import { checkParam, checkUpstreamPath } from './upstream-path.js';

function proxied(rest: string): { route: string; path: string } | string {
  const { match } = matchRoute('GET', `/v1/tenants/acme/proxy/${rest}`);
  if (match === null) return 'unmatched';
  try {
    return upstreamCall(match);
  } catch (e) {
    return (e as { code: string }).code;
  }
}

describe('the canonical upstream path', () => {
  it.each([
    ['workflows', ['workflows']],
    ['workflows/wf_1/approvals', ['workflows', 'wf_1', 'approvals']],
    ['workflows/', ['workflows']],
    ['webhooks/h%201', ['webhooks', 'h 1']],
    ["files/it's.pdf", ['files', "it's.pdf"]],
    ['a/b.c/..d', ['a', 'b.c', '..d']],
    ['%E2%9C%93', ['✓']],
  ])('%s is plain', (raw, segments) => {
    expect(checkUpstreamPath(raw)).toEqual({ ok: true, segments });
  });

  it.each([
    ['', 'not_plain'],
    ['..', 'outside_base'],
    ['../x', 'outside_base'],
    ['x/../../y', 'outside_base'],
    ['x\\..\\..\\y', 'outside_base'],
    ['webhooks/x\\..\\..\\workflows', 'not_plain'],
    ['%2e%2e/x', 'outside_base'],
    ['%2E%2E%2Fx', 'outside_base'],
    ['..%2fx', 'outside_base'],
    ['..%5cx', 'outside_base'],
    ['x/..%5C..%5Cy', 'outside_base'],
    ['workflows/../oauth/token', 'not_plain'],
    ['workflows/./x', 'not_plain'],
    ['workflows/%2e/x', 'not_plain'],
    ['webhooks%2F..%2Fworkflows', 'not_plain'],
    ['webhooks%2fh1', 'not_plain'],
    ['webhooks%5Ch1', 'not_plain'],
    ['webhooks\\h1', 'not_plain'],
    ['a//b', 'not_plain'],
    ['/a', 'not_plain'],
    ['%252e%252e/x', 'not_plain'],
    ['x%2500', 'not_plain'],
    ['x%00', 'nul'],
    ['x\u0000', 'nul'],
    ['x%0a', 'not_plain'],
    ['x%', 'not_plain'],
    ['x%zz', 'not_plain'],
    ['x%23y', 'not_plain'],
  ])('%s is refused (%s)', (raw, reason) => {
    expect(checkUpstreamPath(raw)).toEqual({ ok: false, reason });
  });

  it('chooses the token on the canonical form, and sends the path as sent', () => {
    expect(proxied('webhooks')).toEqual({ route: 'admin', path: '/webhooks' });
    expect(proxied('webhooks/h1?x=1')).toEqual({ route: 'admin', path: '/webhooks/h1?x=1' });
    expect(proxied('Webhooks/h1')).toEqual({ route: 'admin', path: '/Webhooks/h1' });
    expect(proxied('%77ebhooks/h1')).toEqual({ route: 'admin', path: '/%77ebhooks/h1' });
    expect(proxied('webhooksx')).toEqual({ route: 'user', path: '/webhooksx' });
    expect(proxied('workflows?step=Create&x=%2F..%2F')).toEqual({ route: 'user', path: '/workflows?step=Create&x=%2F..%2F' });
    for (const rest of [
      'webhooks/x\\..\\..\\workflows',
      'webhooks/..%2F..%2Fworkflows',
      'x/..%2F..%2Fwebhooks',
      '..%2Fwebhooks',
      'webhooks/%2e%2e/workflows',
    ]) {
      expect([rest, proxied(rest)]).toEqual([rest, 'invalid_path']);
    }
    expect(proxied('x%00')).toBe('invalid_path');
  });

  it('checks typed path parameters: NUL is validation_failed, anything but one plain segment invalid_path', () => {
    expect(checkParam('wf_1')).toEqual({ ok: true, value: 'wf_1' });
    expect(checkParam('wf%201')).toEqual({ ok: true, value: 'wf 1' });
    expect(checkParam('wf%00')).toEqual({ ok: false, reason: 'nul' });
    expect(checkParam('wf\u0000')).toEqual({ ok: false, reason: 'nul' });
    for (const raw of ['..', '.', '%2e%2e', '%2E', 'a%2Fb', 'a%5Cb', 'a\\b', '%252e', 'a%0d', '%zz']) {
      expect([raw, checkParam(raw)]).toEqual([raw, { ok: false, reason: 'not_plain' }]);
    }
    const call = (url: string, method = 'GET') => {
      try {
        return upstreamCall((matchRoute(method, url).match as RouteMatch) ?? null);
      } catch (e) {
        return (e as { code: string }).code;
      }
    };
    expect(call('/v1/tenants/acme/workflows/wf_1')).toEqual({ route: 'user', path: '/workflows/wf_1' });
    expect(call('/v1/tenants/acme/workflows/%00')).toBe('validation_failed');
    expect(call('/v1/tenants/acme/workflows/..%2F..%2Fwebhooks')).toBe('invalid_path');
    expect(call('/v1/tenants/acme/workflows/%2e%2e/approvals', 'PATCH')).toBe('invalid_path');
    expect(call('/v1/tenants/acme/me?x=1')).toEqual({ route: 'userinfo', path: '/userinfo?x=1' });
  });
});
