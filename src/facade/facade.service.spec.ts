import { describe, expect, it } from '@jest/globals';
import { ANSWER_HEADER_LIST } from '../common/security-headers.js';
import { answerHeaderList, forwardedRequestHeaders } from './facade.service.js';

describe('headers across the facade', () => {
  it('forwards end-to-end request headers only', () => {
    const out = forwardedRequestHeaders({
      host: 'cws-connect.example',
      authorization: 'Bearer partner-key',
      'x-user-id': 'u-alice',
      cookie: 'a=b',
      connection: 'keep-alive, X-Hop',
      'keep-alive': 'timeout=5',
      'x-hop': '1',
      te: 'trailers',
      trailer: 'x-t',
      'transfer-encoding': 'chunked',
      upgrade: 'h2c',
      'proxy-authorization': 'Basic x',
      expect: '100-continue',
      'content-type': 'application/json',
      'content-length': '12',
      accept: 'application/json',
      'x-request-id': 'r1',
    });
    expect(out).toEqual({ 'content-type': 'application/json', 'content-length': '12', accept: 'application/json', 'x-request-id': 'r1' });
  });

  it('passes upstream answer headers back without hop-by-hop ones or cookies, after the request id and the security headers, with x-upstream-status', () => {
    const out = answerHeaderList(
      {
        'content-type': 'application/json',
        'content-length': '2',
        connection: 'close, x-internal',
        'x-internal': 'y',
        'keep-alive': 'timeout=5',
        'set-cookie': ['s=1'],
        'transfer-encoding': 'chunked',
        'www-authenticate': 'Bearer realm="cws"',
        etag: '"1"',
      },
      401,
      'r-1',
    );
    const ours = ANSWER_HEADER_LIST.length;
    expect(out.slice(0, ours)).toEqual(['x-request-id', 'r-1', ...ANSWER_HEADER_LIST.slice(2)]);
    expect(out.slice(ours)).toEqual([
      'content-type',
      'application/json',
      'content-length',
      '2',
      'www-authenticate',
      'Bearer realm="cws"',
      'etag',
      '"1"',
      'x-upstream-status',
      '401',
    ]);
  });

  it("lets an upstream header of one of our names replace ours (one value each, the upstream's)", () => {
    const out = answerHeaderList({ 'x-frame-options': 'DENY', 'x-request-id': 'upstream-id', etag: '"1"' }, 200, 'r-1');
    const names = out.filter((_, i) => i % 2 === 0).map((n) => (n as string).toLowerCase());
    expect(names.filter((n) => n === 'x-frame-options')).toHaveLength(1);
    expect(names.filter((n) => n === 'x-request-id')).toHaveLength(1);
    expect(out[out.indexOf('x-frame-options') + 1]).toBe('DENY');
    expect(out[out.indexOf('x-request-id') + 1]).toBe('upstream-id');
    expect(names).toContain('x-content-type-options');
    expect(names.length).toBe(ANSWER_HEADER_LIST.length / 2 + 2);
  });
});
