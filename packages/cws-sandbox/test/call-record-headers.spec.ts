import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call } from './helpers.js';

describe('the call record names the request headers received (what a proxy forwarded)', () => {
  let sandbox: SandboxServer;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'] });
  });
  afterAll(() => sandbox.close());

  it('records header names in lower case, never their values', async () => {
    const tokens = sandbox.issueTokens('alice');
    const res = await call(sandbox.url, 'GET', '/workflows', {
      token: tokens.access_token,
      headers: { 'X-Custom-Thing': 'secret-value', Cookie: 'a=b' },
    });
    expect(res.status).toBe(200);
    const record = sandbox.records().at(-1)!;
    expect(record.headerNames).toEqual(expect.arrayContaining(['x-custom-thing', 'cookie', 'authorization', 'host']));
    expect(JSON.stringify(record)).not.toContain('secret-value');
    expect(JSON.stringify(record)).not.toContain(tokens.access_token);
  });
});
