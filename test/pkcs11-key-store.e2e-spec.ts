import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import { newTenantAt } from './support/connect.js';
import { seedConnections, type SeededConnection } from './support/seed-connections.js';
import { createSoftHsmToken, type SoftHsmToken } from './support/softhsm.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';

jest.setTimeout(120_000);

const VAULT_KEYS = testVaultKey('k1');
const OPERATOR_KEY = `cwsop_test_${randomBytes(24).toString('base64url')}`;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Issue 44, KEY_STORE=pkcs11 on SoftHSM2 (installed and initialised by the test setup): data keys wrapped on the
 * token, read back after a restart; a wrong KEK label stops the start with one line; with the token gone, once the
 * cache's grace has passed, calls that need the tenant's key answer 503 key_store_unavailable.
 */
describe('KEY_STORE=pkcs11 on SoftHSM2', () => {
  let token: SoftHsmToken;
  let sandbox: SandboxServer;
  let databaseUrl: string;
  let db: pg.Pool;
  let app: SpawnedApp | null = null;
  let connection: SeededConnection;

  const env = (extra: Record<string, string> = {}) =>
    spawnedEnv('pkcs11', databaseUrl, sandbox, OPERATOR_KEY, {
      VAULT_KEYS,
      VAULT_HEARTBEAT_MS: '250',
      REFRESH_SCHEDULER: 'off',
      KEY_CACHE_TTL: '1s',
      KEY_CACHE_GRACE: '1s',
      ...token.env,
      ...extra,
    });
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${app?.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${OPERATOR_KEY}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null };
  };

  beforeAll(async () => {
    token = createSoftHsmToken();
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
  });

  afterAll(async () => {
    await app?.stop('SIGTERM');
    await db?.end();
    await sandbox?.close();
  });

  it('a wrong KEK label stops the start with one line naming it, never the PIN', async () => {
    const failed = await spawnApp(env({ PKCS11_KEK_LABEL: 'no-such-key' }), { readyTimeoutMs: 60_000 }).then(
      () => null,
      (e: unknown) => (e as Error).message,
    );
    expect(failed).toContain('PKCS11_KEK_LABEL');
    expect(failed).toContain('no-such-key');
    expect(failed).not.toContain(token.pin);
  });

  it('wraps each data key on the token, and reads everything back after a restart', async () => {
    app = await spawnApp(env(), { readyTimeoutMs: 60_000 });
    await newTenantAt(app.url, OPERATOR_KEY, 'acme');
    [connection] = await seedConnections(db, VAULT_KEYS, [
      { tenantId: 'acme', userId: 'u-1', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
    ]);
    expect((await call('POST', `/v1/tenants/acme/connections/${connection.id}/refresh`)).status).toBe(200);
    const key = await db.query<{ kek_id: string; wrapped_key: string }>(
      `SELECT kek_id, wrapped_key FROM tenant_keys WHERE tenant_id = 'acme'`,
    );
    expect(key.rows).toHaveLength(1);
    expect(key.rows[0].kek_id).toBe('pkcs11:cws-kek');
    expect(key.rows[0].wrapped_key.startsWith('p11.')).toBe(true);
    const row = await db.query<{ a: string; s: string }>(
      `SELECT c.access_token_enc AS a, t.events_secret_enc AS s FROM connections c JOIN tenants t ON t.id = c.tenant_id WHERE c.id = $1`,
      [connection.id],
    );
    expect([row.rows[0].a.slice(0, 5), row.rows[0].s.slice(0, 5)]).toEqual(['v2.1.', 'v2.1.']);
    const ready = await call('GET', '/health/ready');
    expect((ready.body?.info as Record<string, unknown>).keyStore).toEqual({
      status: 'up',
      store: 'pkcs11',
      kekId: 'pkcs11:cws-kek',
      state: 'available',
    });
    expect(ready.text).not.toContain(token.pin);

    expect(await app.stop('SIGTERM')).toBe(0);
    app = await spawnApp(env(), { readyTimeoutMs: 60_000 });
    expect((await call('GET', '/v1/tenants/acme/me', undefined, { 'x-user-id': 'u-1' })).status).toBe(200);
    // Opens the current events secret and seals two: both need the tenant's data key, unwrapped on the token.
    expect((await call('POST', '/v1/tenants/acme/events-secret', { overlapSeconds: 60 })).status).toBe(201);
    expect(app.output.join('')).not.toContain(token.pin);
  });

  it('with the key out of reach, once KEY_CACHE_TTL and KEY_CACHE_GRACE have passed: 503 key_store_unavailable, still ready', async () => {
    token.destroy();
    await sleep(2500);
    const deadline = Date.now() + 10_000;
    let res = await call('POST', '/v1/tenants/acme/events-secret', { overlapSeconds: 60 });
    while (res.status === 201 && Date.now() < deadline) {
      await sleep(250);
      res = await call('POST', '/v1/tenants/acme/events-secret', { overlapSeconds: 60 });
    }
    expect(res.status).toBe(503);
    expect((res.body?.error as Record<string, unknown>).code).toBe('key_store_unavailable');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const ready = await call('GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(((ready.body?.info as Record<string, unknown>).keyStore as Record<string, unknown>).state).toBe('unavailable');
  });
});
