import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { authorizeCode, basicAuth, call, connectUser, tokenRequest } from './helpers.js';

const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const OTHER_REDIRECT = 'http://127.0.0.1:9/other/callback';

describe('POST /oauth/token (spec 4.1, 2.2, 5.1)', () => {
  let sandbox: SandboxServer;
  let now = Date.now();
  beforeAll(async () => {
    sandbox = await SandboxServer.start({
      redirectUris: [REDIRECT, OTHER_REDIRECT],
      clientSecret: 's3cret-value',
      accessTokenTtlSeconds: 120,
      codeTtlSeconds: 30,
      clock: () => now,
    });
  });
  afterAll(() => sandbox.close());

  const code = (userId = 'alice', scope = 'workflows.read userinfo.read', redirectUri = REDIRECT) =>
    authorizeCode(sandbox, userId, { redirectUri, scope });
  const bodyCreds = () => ({ client_id: sandbox.clientId, client_secret: sandbox.clientSecret });
  const exchange = async (c: string, extra: Record<string, unknown> = {}, headers?: Record<string, string>) =>
    tokenRequest(sandbox, { grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT, ...bodyCreds(), ...extra }, headers);

  describe('body format', () => {
    it('refuses a form-encoded body with 400 invalid_request', async () => {
      const c = await code();
      const form = new URLSearchParams({ grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT, ...bodyCreds() });
      const answer = await call<{ error: string }>(sandbox.url, 'POST', '/oauth/token', {
        body: form.toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toBe('invalid_request');
      const record = sandbox.records().at(-1);
      expect(record).toMatchObject({ path: '/oauth/token', bodyFormat: 'form', status: 400, outcome: 'form_body_refused' });
      // The refused attempt did not consume the code.
      expect((await exchange(c)).status).toBe(200);
    });

    it('refuses a body without a content-type, bad JSON and a non-object', async () => {
      const plain = await call<{ error: string }>(sandbox.url, 'POST', '/oauth/token', { body: '{"grant_type":"refresh_token"}' });
      expect(plain.status).toBe(400);
      const bad = await call<{ error: string }>(sandbox.url, 'POST', '/oauth/token', {
        body: '{',
        headers: { 'content-type': 'application/json' },
      });
      expect([bad.status, bad.body.error]).toEqual([400, 'invalid_request']);
      const array = await call<{ error: string }>(sandbox.url, 'POST', '/oauth/token', { json: [] });
      expect([array.status, array.body.error]).toEqual([400, 'invalid_request']);
    });

    it('errors use the RFC 6749 5.2 shape and are not cached', async () => {
      const answer = await tokenRequest(sandbox, { grant_type: 'password', ...bodyCreds() });
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({ error: 'unsupported_grant_type', error_description: expect.any(String) });
      expect(answer.headers.get('cache-control')).toBe('no-store');
    });
  });

  describe('client authentication', () => {
    it('accepts the credentials in the body', async () => {
      const answer = await exchange(await code());
      expect(answer.status).toBe(200);
      expect(sandbox.records().at(-1)).toMatchObject({
        clientAuth: 'body',
        bodyFormat: 'json',
        grantType: 'authorization_code',
        outcome: 'ok',
      });
    });

    it.each(['Basic', 'Base', 'basic'])('accepts Authorization: %s base64(id:secret)', async (keyword) => {
      const c = await code();
      const answer = await tokenRequest(
        sandbox,
        { grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT },
        { authorization: basicAuth(sandbox.clientId, sandbox.clientSecret, keyword) },
      );
      expect(answer.status).toBe(200);
      expect(sandbox.records().at(-1)?.clientAuth).toBe('basic-header');
    });

    it('refuses both places at once, neither, half of the body pair, and a wrong secret (401 invalid_client)', async () => {
      const c = await code();
      const header = { authorization: basicAuth(sandbox.clientId, sandbox.clientSecret) };
      const both = await exchange(c, {}, header);
      const neither = await tokenRequest(sandbox, { grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT });
      const half = await tokenRequest(sandbox, {
        grant_type: 'authorization_code',
        code: c,
        redirect_uri: REDIRECT,
        client_id: sandbox.clientId,
      });
      const wrongBody = await exchange(c, { client_secret: 's3cret-valuE' });
      const wrongHeader = await tokenRequest(
        sandbox,
        { grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT },
        { authorization: basicAuth(sandbox.clientId, 'nope') },
      );
      const wrongId = await exchange(c, { client_id: 'someone-else' });
      const bearer = await tokenRequest(
        sandbox,
        { grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT },
        { authorization: 'Bearer abc' },
      );
      for (const answer of [both, neither, half, wrongBody, wrongHeader, wrongId, bearer]) {
        expect(answer.status).toBe(401);
        expect(answer.body.error).toBe('invalid_client');
      }
      expect(wrongHeader.headers.get('www-authenticate')).toContain('Basic');
      // None of them consumed the code.
      expect((await exchange(c)).status).toBe(200);
    });
  });

  describe('authorization_code grant', () => {
    it('answers exactly {access_token, refresh_token, scope[], expiresIn, token_type}', async () => {
      const answer = await exchange(await code('bob', 'workflows.read workflows.write'));
      expect(answer.status).toBe(200);
      expect(Object.keys(answer.body).sort()).toEqual(['access_token', 'expiresIn', 'refresh_token', 'scope', 'token_type']);
      expect(answer.body.scope).toEqual(['workflows.read', 'workflows.write']);
      expect(answer.body.expiresIn).toBe(120);
      expect(answer.body.token_type).toBe('Bearer');
      expect(answer.body.access_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(answer.body.refresh_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(answer.headers.get('cache-control')).toBe('no-store');
    });

    it('a code is single-use; the second use fails and revokes the tokens issued from it (RFC 6749 4.1.2)', async () => {
      const c = await code();
      const first = await exchange(c);
      expect(first.status).toBe(200);
      const me = await call(sandbox.url, 'GET', '/userinfo', { token: first.body.access_token });
      expect(me.status).toBe(200);
      const second = await exchange(c);
      expect(second.status).toBe(400);
      expect(second.body.error).toBe('invalid_grant');
      expect(sandbox.records().at(-1)?.outcome).toBe('code_reuse');
      expect((await call(sandbox.url, 'GET', '/userinfo', { token: first.body.access_token })).status).toBe(401);
      const refreshed = await tokenRequest(sandbox, {
        grant_type: 'refresh_token',
        refresh_token: first.body.refresh_token,
        ...bodyCreds(),
      });
      expect([refreshed.status, refreshed.body.error]).toEqual([400, 'invalid_grant']);
    });

    it('a code expires after codeTtlSeconds', async () => {
      const c = await code();
      now += 30_000;
      const answer = await exchange(c);
      expect([answer.status, answer.body.error]).toEqual([400, 'invalid_grant']);
      expect(sandbox.records().at(-1)?.outcome).toBe('code_expired');
      const fresh = await code();
      now += 29_000;
      expect((await exchange(fresh)).status).toBe(200);
    });

    it('redirect_uri must be identical to the one of the authorization request', async () => {
      const c = await code('alice', 'workflows.read', OTHER_REDIRECT);
      const mismatch = await exchange(c);
      expect([mismatch.status, mismatch.body.error]).toEqual([400, 'invalid_grant']);
      const missing = await tokenRequest(sandbox, { grant_type: 'authorization_code', code: c, ...bodyCreds() });
      expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
      const unregistered = await exchange(c, { redirect_uri: `${OTHER_REDIRECT}/` });
      expect([unregistered.status, unregistered.body.error]).toEqual([400, 'invalid_grant']);
      expect((await exchange(c, { redirect_uri: OTHER_REDIRECT })).status).toBe(200);
    });

    it('refuses a missing or unknown code', async () => {
      const missing = await tokenRequest(sandbox, { grant_type: 'authorization_code', redirect_uri: REDIRECT, ...bodyCreds() });
      expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
      const unknown = await exchange('not-a-code');
      expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_grant']);
      const typed = await exchange(42 as unknown as string);
      expect([typed.status, typed.body.error]).toEqual([400, 'invalid_request']);
    });
  });

  describe('refresh_token grant', () => {
    const refresh = (refreshToken: string, extra: Record<string, unknown> = {}) =>
      tokenRequest(sandbox, { grant_type: 'refresh_token', refresh_token: refreshToken, ...bodyCreds(), ...extra });

    it('replaces both tokens; the old refresh token and the old access token are dead', async () => {
      const first = await connectUser(sandbox, 'carol', REDIRECT, 'workflows.read userinfo.read');
      const before = sandbox.stats();
      const answer = await refresh(first.refresh_token);
      expect(answer.status).toBe(200);
      expect(Object.keys(answer.body).sort()).toEqual(['access_token', 'expiresIn', 'refresh_token', 'token_type']);
      expect(answer.body.expiresIn).toBe(120);
      expect(answer.body.token_type).toBe('Bearer');
      expect(answer.body.access_token).not.toBe(first.access_token);
      expect(answer.body.refresh_token).not.toBe(first.refresh_token);
      expect((await call(sandbox.url, 'GET', '/userinfo', { token: first.access_token })).status).toBe(401);
      expect(sandbox.records().at(-1)?.outcome).toBe('revoked_token');
      const me = await call<{ id: string; scopes: string[] }>(sandbox.url, 'GET', '/userinfo', { token: answer.body.access_token });
      expect(me.status).toBe(200);
      expect(me.body.scopes).toEqual(['workflows.read', 'userinfo.read']);
      expect(sandbox.stats().refreshes).toBe(before.refreshes + 1);
      const log = sandbox.refreshLog().at(-1);
      expect(log).toMatchObject({ userId: 'carol', usedRefreshTokenHash: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect(JSON.stringify(sandbox.refreshLog())).not.toContain(first.refresh_token);
    });

    it('reuse of a used refresh token revokes the whole family, is counted and answers invalid_grant', async () => {
      const first = await connectUser(sandbox, 'dave', REDIRECT);
      const second = (await refresh(first.refresh_token)).body;
      const third = (await refresh(second.refresh_token)).body;
      const before = sandbox.stats().refreshReuses;
      const reuse = await refresh(first.refresh_token);
      expect([reuse.status, reuse.body.error]).toEqual([400, 'invalid_grant']);
      expect(sandbox.stats().refreshReuses).toBe(before + 1);
      const record = sandbox.records().at(-1);
      expect(record?.outcome).toBe('refresh_reuse');
      expect(record?.tokenFamily).toMatch(/^fam_/);
      expect((await call(sandbox.url, 'GET', '/workflows', { token: third.access_token })).status).toBe(401);
      const latest = await refresh(third.refresh_token);
      expect([latest.status, latest.body.error]).toEqual([400, 'invalid_grant']);
      expect(sandbox.records().at(-1)?.outcome).toBe('revoked_grant');
    });

    it('scope must be within the registered and the previously granted scopes', async () => {
      const first = await connectUser(sandbox, 'alice', REDIRECT, 'workflows.read workflows.write');
      const wider = await refresh(first.refresh_token, { scope: 'workflows.read webhooks.manage' });
      expect([wider.status, wider.body.error]).toEqual([400, 'invalid_scope']);
      const unregistered = await refresh(first.refresh_token, { scope: 'workflows.admin' });
      expect([unregistered.status, unregistered.body.error]).toEqual([400, 'invalid_scope']);
      const asArray = await refresh(first.refresh_token, { scope: ['workflows.read'] });
      expect([asArray.status, asArray.body.error]).toEqual([400, 'invalid_request']);
      const narrower = await refresh(first.refresh_token, { scope: 'workflows.read' });
      expect(narrower.status).toBe(200);
      expect(narrower.body.scope).toBeUndefined();
      // Narrowed now, but the original grant still bounds the next refresh.
      const write = await call(sandbox.url, 'POST', '/workflows', { token: narrower.body.access_token, json: { name: 'x' } });
      expect(write.status).toBe(403);
      const back = await refresh(narrower.body.refresh_token, { scope: 'workflows.read workflows.write' });
      expect(back.status).toBe(200);
    });

    it('an unknown or missing refresh token, and a user whose grants were revoked', async () => {
      expect((await refresh('unknown')).body.error).toBe('invalid_grant');
      const missing = await tokenRequest(sandbox, { grant_type: 'refresh_token', ...bodyCreds() });
      expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
      const tokens = await connectUser(sandbox, 'bob', REDIRECT);
      expect(sandbox.revokeUser('bob')).toBeGreaterThanOrEqual(1);
      expect((await refresh(tokens.refresh_token)).body.error).toBe('invalid_grant');
      expect((await call(sandbox.url, 'GET', '/userinfo', { token: tokens.access_token })).status).toBe(401);
    });
  });

  it('records never hold token values or the client secret', async () => {
    const tokens = await connectUser(sandbox, 'alice', REDIRECT);
    await call(sandbox.url, 'GET', `/workflows?access_token=${tokens.access_token}`, { token: tokens.access_token });
    const all = JSON.stringify(sandbox.records());
    expect(all).not.toContain(tokens.access_token);
    expect(all).not.toContain(tokens.refresh_token);
    expect(all).not.toContain(sandbox.clientSecret);
    expect(sandbox.records().at(-1)?.query).toBe('access_token=[REDACTED]');
  });
});

describe('token lifetime defaults', () => {
  it('expiresIn is 21600 by default (spec 5.1)', async () => {
    const sandbox = await SandboxServer.start({ redirectUris: [REDIRECT] });
    try {
      const tokens = await connectUser(sandbox, 'alice', REDIRECT);
      expect(tokens.expiresIn).toBe(21600);
      expect(sandbox.issueTokens('bob').expiresIn).toBe(21600);
    } finally {
      await sandbox.close();
    }
  });
});
