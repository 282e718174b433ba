import { describe, expect, it } from '@jest/globals';
import { forwardedRequestHeaders, responseHeaders } from './facade.service.js';

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

  it('passes upstream answer headers back without hop-by-hop ones or cookies, with x-upstream-status', () => {
    const out = responseHeaders(
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
    );
    expect(out).toEqual({
      'content-type': 'application/json',
      'content-length': '2',
      'www-authenticate': 'Bearer realm="cws"',
      etag: '"1"',
      'x-upstream-status': '401',
    });
  });
});
