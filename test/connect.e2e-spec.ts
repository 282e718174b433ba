import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConnectService } from '../src/connect/connect.service.js';
import { authorizeAtSandbox, connectViaHttp, newTenant, openCallback } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error: { code: string; message: string };
}
interface Connection {
  id: string;
  kind: string;
  userId: string | null;
  upstreamUser: { id: string; email: string | null };
  isAdmin: boolean;
  status: string;
  scopes: string[];
  accessTokenExpiresAt: string;
}

describe('the connect flow (API.md sections 5 and 6)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
  });
  afterAll(async () => {
    await t.close();
  });

  it('connects a user: tokens sealed, expiry from expiresIn, token request sent as JSON', async () => {
    const before = Date.now();
    const out = await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    expect(out.status).toBe('connected');
    expect(out.location.origin + out.location.pathname).toBe('http://localhost:5173/done');
    const conn = await t.request<Connection>('GET', `/v1/tenants/acme/connections/${out.connectionId}`);
    expect(conn.status).toBe(200);
    expect(conn.body).toMatchObject({
      kind: 'user',
      userId: 'u-alice',
      upstreamUser: { id: 'alice', email: 'alice@acme.example' },
      status: 'active',
      isAdmin: false,
    });
    const expires = Date.parse(conn.body.accessTokenExpiresAt);
    expect(expires).toBeGreaterThanOrEqual(before + 21600_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 21600_000 + 1000);

    const tokenCalls = t.sandbox!.records().filter((r) => r.path === '/oauth/token');
    expect(tokenCalls.length).toBeGreaterThan(0);
    expect(tokenCalls.every((r) => r.bodyFormat === 'json' && r.clientAuth === 'body' && r.status === 200)).toBe(true);
    const authorize = out.callbackUrl;
    expect(authorize.origin + authorize.pathname).toBe(`${t.config.publicUrl}/oauth/callback`);
  });

  it('reconnecting the same user replaces the tokens and keeps the id', async () => {
    const first = await connectViaHttp(t, 'acme', { userId: 'u-bob', as: 'bob' });
    const before = await t.db.query<{ access_token_enc: string; version: string }>(
      'SELECT access_token_enc, version FROM connections WHERE id = $1',
      [first.connectionId],
    );
    const second = await connectViaHttp(t, 'acme', { userId: 'u-bob', as: 'bob' });
    expect(second.connectionId).toBe(first.connectionId);
    const after = await t.db.query<{ access_token_enc: string; version: string }>(
      'SELECT access_token_enc, version FROM connections WHERE id = $1',
      [first.connectionId],
    );
    expect(after.rows[0].access_token_enc).not.toBe(before.rows[0].access_token_enc);
    expect(Number(after.rows[0].version)).toBe(Number(before.rows[0].version) + 1);
  });

  it('a Deny on the consent page returns with status=error&error=access_denied and creates nothing', async () => {
    const before = await t.db.query('SELECT count(*)::int AS n FROM connections');
    const out = await connectViaHttp(t, 'acme', { userId: 'u-dave', as: 'dave', decision: 'deny' });
    expect(out.status).toBe('error');
    expect(out.error).toBe('access_denied');
    const after = await t.db.query('SELECT count(*)::int AS n FROM connections');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('connects the admin, checked with GET /webhooks; a non-admin as admin ends with error=not_admin', async () => {
    const admin = await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    expect(admin.status).toBe('connected');
    const conn = await t.request<Connection>('GET', `/v1/tenants/acme/connections/${admin.connectionId}`);
    expect(conn.body).toMatchObject({ kind: 'admin', userId: null, isAdmin: true });

    await newTenant(t, 'beta');
    const wrong = await connectViaHttp(t, 'beta', { kind: 'admin', as: 'carol' });
    expect(wrong.status).toBe('error');
    expect(wrong.error).toBe('not_admin');
    const list = await t.request<{ connections: Connection[] }>('GET', '/v1/tenants/beta/connections');
    expect(list.body.connections).toHaveLength(1);
    expect(list.body.connections[0]).toMatchObject({ kind: 'admin', isAdmin: false });
  });

  it('refuses a replayed, unknown or missing state and creates nothing', async () => {
    const out = await connectViaHttp(t, 'acme', { userId: 'u-carol', as: 'carol' });
    const count = await t.db.query('SELECT count(*)::int AS n FROM connections');
    const replay = await fetch(out.callbackUrl, { redirect: 'manual', headers: { cookie: out.cookie } });
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as ErrorBody).error.code).toBe('connect_state_invalid');

    const forged = new URL(out.callbackUrl);
    forged.searchParams.set('state', 'A'.repeat(43));
    const unknown = await fetch(forged, { redirect: 'manual', headers: { accept: 'text/html', cookie: out.cookie } });
    expect(unknown.status).toBe(400);
    const html = await unknown.text();
    expect(unknown.headers.get('content-type')).toContain('text/html');
    expect(html).toContain('connect_state_invalid');

    const none = await fetch(`${t.url}/oauth/callback?code=x`, { redirect: 'manual' });
    expect(none.status).toBe(400);
    expect(((await none.json()) as ErrorBody).error.code).toBe('connect_state_invalid');
    expect((await t.db.query('SELECT count(*)::int AS n FROM connections')).rows[0].n).toBe(count.rows[0].n);
  });

  it('refuses an expired state with connect_state_invalid, and an expired connect link with connect_session_expired', async () => {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-late', returnUrl: 'http://localhost:5173/x' },
    });
    const callback = await authorizeAtSandbox(session.body.connectUrl, 'dave', 'approve');
    await t.db.query(
      `UPDATE connect_sessions SET state_expires_at = now() - interval '1 second', expires_at = now() - interval '1 second' WHERE user_id = 'u-late'`,
    );
    const res = await openCallback(callback);
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.code).toBe('connect_state_invalid');
    expect(body.error.message).toContain('expired');
    expect((await t.db.query(`SELECT count(*)::int AS n FROM connections WHERE user_id = 'u-late'`)).rows[0].n).toBe(0);

    const stale = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-stale', returnUrl: 'http://localhost:5173/x' },
    });
    await t.db.query(`UPDATE connect_sessions SET expires_at = now() - interval '1 second' WHERE user_id = 'u-stale'`);
    const opened = await fetch(stale.body.connectUrl, { redirect: 'manual' });
    expect(opened.status).toBe(400);
    expect(((await opened.json()) as ErrorBody).error.code).toBe('connect_session_expired');
  });

  it('a connect URL is single use', async () => {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-twice', returnUrl: 'http://localhost:5173/x' },
    });
    expect((await fetch(session.body.connectUrl, { redirect: 'manual' })).status).toBe(302);
    const again = await fetch(session.body.connectUrl, { redirect: 'manual' });
    expect(again.status).toBe(400);
    expect(((await again.json()) as ErrorBody).error.code).toBe('connect_session_expired');
  });

  it('refuses a returnUrl outside the allow-list and unregistered scopes with 400 before any redirect', async () => {
    const cases = [
      { kind: 'user', userId: 'x', returnUrl: 'https://evil.example/' },
      { kind: 'user', userId: 'x', returnUrl: 'http://localhost:5173.evil.example/' },
      { kind: 'user', userId: 'x', returnUrl: 'http://localhost:5173/', scopes: ['records.admin'] },
      { kind: 'user', returnUrl: 'http://localhost:5173/' },
      { kind: 'admin', userId: 'x', returnUrl: 'http://localhost:5173/' },
      { kind: 'robot', returnUrl: 'http://localhost:5173/' },
    ];
    for (const body of cases) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants/acme/connect-sessions', { body });
      expect([JSON.stringify(body), res.status, res.body.error.code]).toEqual([JSON.stringify(body), 400, 'validation_failed']);
    }
    expect((await t.db.query('SELECT count(*)::int AS n FROM connect_sessions WHERE user_id = $1', ['x'])).rows[0].n).toBe(0);
  });

  it('never shows a token: not in any answer, not in any table', async () => {
    const out = await connectViaHttp(t, 'acme', { userId: 'u-secret', as: 'alice' });
    const issued = t.sandbox!.issuedTokenValues();
    const list = await t.request('GET', '/v1/tenants/acme/connections');
    const dump = await t.db.query(`SELECT json_agg(c)::text AS j FROM (SELECT * FROM connections) c`);
    const sessions = await t.db.query(`SELECT json_agg(s)::text AS j FROM (SELECT * FROM connect_sessions) s`);
    const events = await t.db.query(`SELECT json_agg(e)::text AS j FROM (SELECT * FROM events) e`);
    const everything = list.text + dump.rows[0].j + sessions.rows[0].j + events.rows[0].j + out.location.toString() + t.logs.join('');
    expect(issued.length).toBeGreaterThan(0);
    for (const token of issued) expect(everything).not.toContain(token);
  });

  it('deletes a connection and its tokens', async () => {
    const out = await connectViaHttp(t, 'acme', { userId: 'u-gone', as: 'dave' });
    expect((await t.request('DELETE', `/v1/tenants/acme/connections/${out.connectionId}`)).status).toBe(204);
    expect((await t.db.query('SELECT count(*)::int AS n FROM connections WHERE id = $1', [out.connectionId])).rows[0].n).toBe(0);
    const gone = await t.request<ErrorBody>('GET', `/v1/tenants/acme/connections/${out.connectionId}`);
    expect(gone.body.error.code).toBe('connection_not_found');
    const ev = await t.db.query(`SELECT type FROM events WHERE tenant_id = 'acme' ORDER BY seq`);
    expect(ev.rows.map((r: { type: string }) => r.type)).toContain('connection.deleted');
  });

  it('sends the client credentials in a Basic header, reads /userinfo with POST when the environment says so, and takes the expiry from expiresIn', async () => {
    // This sandbox issues 1234-second tokens: the stored expiry must follow expiresIn, not the spec's 21600.
    const other = await startTestApp({
      env: { CWS_SANDBOX_TOKEN_AUTH: 'header', CWS_SANDBOX_USERINFO_METHOD: 'POST' },
      sandbox: { accessTokenTtlSeconds: 1234 },
    });
    try {
      await newTenant(other, 'hdr');
      const before = Date.now();
      const out = await connectViaHttp(other, 'hdr', { userId: 'u-h', as: 'bob' });
      expect(out.status).toBe('connected');
      const conn = await other.request<Connection>('GET', `/v1/tenants/hdr/connections/${out.connectionId}`);
      const expires = Date.parse(conn.body.accessTokenExpiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + 1234_000 - 1000);
      expect(expires).toBeLessThanOrEqual(Date.now() + 1234_000 + 1000);
      const records = other.sandbox!.records();
      const token = records.filter((r) => r.path === '/oauth/token');
      expect(token.length).toBe(1);
      expect(token[0]).toMatchObject({ bodyFormat: 'json', clientAuth: 'basic-header', grantType: 'authorization_code', status: 200 });
      expect(records.filter((r) => r.path === '/userinfo').map((r) => r.method)).toEqual(['POST']);
    } finally {
      await other.close();
    }
  });

  it('sweeps connect sessions once they and their state are past their life', async () => {
    await t.request('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-old', returnUrl: 'http://localhost:5173/x' },
    });
    await t.request('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-fresh', returnUrl: 'http://localhost:5173/x' },
    });
    await t.db.query(`UPDATE connect_sessions SET expires_at = now() - interval '11 minutes' WHERE user_id = 'u-old'`);
    expect(await t.app.get(ConnectService).sweepExpiredSessions()).toBeGreaterThanOrEqual(1);
    const left = await t.db.query<{ user_id: string }>(`SELECT user_id FROM connect_sessions WHERE user_id IN ('u-old', 'u-fresh')`);
    expect(left.rows.map((r) => r.user_id)).toEqual(['u-fresh']);
  });
});
