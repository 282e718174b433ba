import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call } from './helpers.js';

describe('bearer authentication of resource endpoints and /userinfo (spec 4, 2.6)', () => {
  let sandbox: SandboxServer;
  let now = Date.now();
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'], accessTokenTtlSeconds: 60, clock: () => now });
  });
  afterAll(() => sandbox.close());

  it('/userinfo answers GET and POST with the token user and the granted scopes', async () => {
    const tokens = sandbox.issueTokens('alice', ['userinfo.read', 'workflows.read']);
    for (const method of ['GET', 'POST']) {
      const me = await call(sandbox.url, method, '/userinfo', { token: tokens.access_token });
      expect(me.status).toBe(200);
      expect(me.body).toEqual({
        id: 'alice',
        email: 'alice@acme.example',
        username: 'alice',
        name: 'Alice Archer',
        companyId: 'company-1',
        scopes: ['userinfo.read', 'workflows.read'],
      });
    }
    expect(sandbox.records().at(-1)).toMatchObject({ tokenUserId: 'alice', tokenFamily: tokens.family, outcome: 'ok' });
    expect((await call(sandbox.url, 'PUT', '/userinfo', { token: tokens.access_token })).status).toBe(405);
  });

  it('a missing, malformed or unknown token gets 401 JSON with a Bearer challenge', async () => {
    const before = sandbox.stats();
    const missing = await call(sandbox.url, 'GET', '/workflows');
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="cws-sandbox"');
    const basic = await call(sandbox.url, 'GET', '/workflows', { headers: { authorization: 'Basic abc' } });
    expect(basic.status).toBe(401);
    const unknown = await call<{ error: string }>(sandbox.url, 'GET', '/workflows', { token: 'x'.repeat(43) });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error).toBe('invalid_token');
    expect(unknown.headers.get('www-authenticate')).toContain('error="invalid_token"');
    const after = sandbox.stats();
    expect(after.unknownTokenCalls).toBe(before.unknownTokenCalls + 1);
    expect(after.resourceCalls).toBe(before.resourceCalls + 3);
  });

  it('an expired access token gets 401 and is counted in expiredTokenCalls', async () => {
    const tokens = sandbox.issueTokens('bob');
    expect((await call(sandbox.url, 'GET', '/workflows', { token: tokens.access_token })).status).toBe(200);
    now += 60_000;
    const before = sandbox.stats().expiredTokenCalls;
    const answer = await call<{ error: string; error_description: string }>(sandbox.url, 'GET', '/workflows', {
      token: tokens.access_token,
    });
    expect(answer.status).toBe(401);
    expect(answer.body.error_description).toContain('expired');
    expect(sandbox.stats().expiredTokenCalls).toBe(before + 1);
    expect(sandbox.records().at(-1)).toMatchObject({ outcome: 'expired_token', tokenFamily: tokens.family });
    expect(sandbox.records().at(-1)?.tokenUserId).toBeUndefined();
  });

  it('expireAccessTokens makes current tokens expired now, by user or by token', async () => {
    const a = sandbox.issueTokens('carol');
    const b = sandbox.issueTokens('carol');
    const c = sandbox.issueTokens('dave');
    expect(sandbox.expireAccessTokens({ accessToken: a.access_token })).toBe(1);
    expect((await call(sandbox.url, 'GET', '/userinfo', { token: a.access_token })).status).toBe(401);
    expect((await call(sandbox.url, 'GET', '/userinfo', { token: b.access_token })).status).toBe(200);
    expect(sandbox.expireAccessTokens({ userId: 'carol' })).toBe(1);
    expect((await call(sandbox.url, 'GET', '/userinfo', { token: b.access_token })).status).toBe(401);
    expect((await call(sandbox.url, 'GET', '/userinfo', { token: c.access_token })).status).toBe(200);
  });

  it('a registered scope the token lacks gives 403 insufficient_scope', async () => {
    const tokens = sandbox.issueTokens('alice', ['workflows.read']);
    const answer = await call<{ error: string }>(sandbox.url, 'GET', '/userinfo', { token: tokens.access_token });
    expect([answer.status, answer.body.error]).toEqual([403, 'insufficient_scope']);
  });

  it('unknown paths get 404 JSON and a wrong method 405 with Allow', async () => {
    const tokens = sandbox.issueTokens('alice');
    expect((await call(sandbox.url, 'GET', '/nope', { token: tokens.access_token })).status).toBe(404);
    const wrong = await call(sandbox.url, 'DELETE', '/workflows', { token: tokens.access_token });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, POST');
  });
});
