import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import { KeyStoreUnavailable } from '../src/vault/key-store.js';
import { TenantKeys } from '../src/vault/tenant-keys.service.js';
import { TokenVault, VaultError } from '../src/vault/token-vault.service.js';
import { ENVELOPE_CAPABILITY } from '../src/vault/vault-instances.service.js';
import { newTenant } from './support/connect.js';
import { seedConnections, type SeededConnection } from './support/seed-connections.js';
import { standaloneVault } from './support/standalone-vault.js';
import { sandboxEnv, startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';

jest.setTimeout(60_000);

const RING = testVaultKey('k1');
/** Short beats: an instance unseen for three (750 ms) is gone. */
const HEARTBEAT_MS = 250;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Issue 44, envelope encryption: each tenant's secrets under its own data key, wrapped by the key store's KEK
 * (KEY_STORE=local: the VAULT_KEYS ring). Over the real app and PostgreSQL; the only fault injected is an
 * unreachable key store, which the local store (in memory) cannot produce for real.
 */
describe('tenant data keys (envelope encryption)', () => {
  let sandbox: SandboxServer;
  let databaseUrl: string;
  let db: pg.Pool;
  let t: TestApp;
  let acme: SeededConnection[];
  let globex: SeededConnection[];

  const sealedSecret = async (tenant: string) =>
    (await db.query<{ v: string }>(`SELECT events_secret_enc AS v FROM tenants WHERE id = $1`, [tenant])).rows[0].v;
  const secretRef = (tenant: string) => ({ table: 'tenants', id: tenant, column: 'events_secret_enc', tenantId: tenant });
  const rotate = async (tenant: string) => {
    const res = await t.request<{ eventsSecret: string }>('POST', `/v1/tenants/${tenant}/events-secret`, { body: {} });
    expect(res.status).toBe(201);
    return res.body.eventsSecret;
  };
  /** A rotation with an overlap: it opens the current secret and seals two, so it needs the tenant's data key. */
  const rotateWithOverlap = (tenant: string) =>
    t.request<{ error?: { code: string } }>('POST', `/v1/tenants/${tenant}/events-secret`, { body: { overlapSeconds: 60 } });
  const me = (tenant: string, c: SeededConnection) =>
    t.request<{ error?: { code: string } }>('GET', `/v1/tenants/${tenant}/me`, { headers: { 'x-user-id': c.userId } });

  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    t = await startTestApp({
      databaseUrl,
      sandbox: false,
      env: {
        VAULT_KEYS: RING,
        VAULT_HEARTBEAT_MS: String(HEARTBEAT_MS),
        REFRESH_SCHEDULER: 'off',
        KEY_CACHE_TTL: '2s',
        KEY_CACHE_GRACE: '3s',
        ...sandboxEnv(sandbox),
      },
    });
    await newTenant(t, 'acme');
    await newTenant(t, 'globex');
    // Rows as release 0.2.0 wrote them: sealed with the ring (v1), which this release opens forever.
    const seed = (tenantId: string, n: number) =>
      seedConnections(
        db,
        RING,
        Array.from({ length: n }, (_, i) => ({
          tenantId,
          userId: `u-${i}`,
          upstreamUserId: 'alice',
          tokens: sandbox.issueTokens('alice'),
        })),
      );
    acme = await seed('acme', 2);
    globex = await seed('globex', 2);
  });

  afterAll(async () => {
    await t?.close();
    await db?.end();
    await sandbox?.close();
  });

  it('advertises the envelope format and seals each tenant with its own data key, wrapped by the ring', async () => {
    const row = await db.query<{ key_ids: string[] }>(`SELECT key_ids FROM vault_instances WHERE instance_id = $1`, [t.config.instanceId]);
    expect(row.rows[0].key_ids).toEqual(['k1', ENVELOPE_CAPABILITY]);
    for (const tenant of ['acme', 'globex']) expect((await sealedSecret(tenant)).startsWith('v2.1.')).toBe(true);
    const keys = await db.query<{ tenant_id: string; version: number; wrapped_key: string; kek_id: string }>(
      `SELECT tenant_id, version, wrapped_key, kek_id FROM tenant_keys ORDER BY tenant_id`,
    );
    expect(keys.rows.map((r) => [r.tenant_id, r.version, r.kek_id])).toEqual([
      ['acme', 1, 'local:k1'],
      ['globex', 1, 'local:k1'],
    ]);
    // Wrapped, never in the clear: the wrapped form is a value of the ring's own format.
    for (const r of keys.rows) expect(r.wrapped_key.startsWith('v1.k1.')).toBe(true);
    // The ring's values (0.2.0's rows) and the tenant keys' values both open: facade calls on v1 tokens.
    expect((await me('acme', acme[0])).status).toBe(200);
    const secret = await rotate('acme');
    expect(await standaloneVault(RING, db).open(await sealedSecret('acme'), secretRef('acme'))).toBe(secret);
  });

  it('seals in the ring format while an instance that does not open the envelope format is live, and in the envelope format once it is gone', async () => {
    // An instance of release 0.2.0 (it holds the ring's key but does not advertise the envelope format) starts beating.
    await db.query(`INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ('release-0.2.0', ARRAY['k1'], now())`);
    const beat = setInterval(() => void db.query(`UPDATE vault_instances SET last_seen = now() WHERE instance_id = 'release-0.2.0'`), 50);
    try {
      const deadline = Date.now() + 5000;
      let secret = await rotate('acme');
      while (!(await sealedSecret('acme')).startsWith('v1.') && Date.now() < deadline) {
        await sleep(50);
        secret = await rotate('acme');
      }
      expect((await sealedSecret('acme')).startsWith('v1.k1.')).toBe(true);
      // 0.2.0 reads that value: the ring alone opens it.
      expect(await standaloneVault(RING).open(await sealedSecret('acme'), secretRef('acme'))).toBe(secret);
      // A renewal while it lives seals the new pair in the ring's format too.
      expect((await t.request('POST', `/v1/tenants/acme/connections/${acme[1].id}/refresh`)).status).toBe(200);
      const pair = await db.query<{ a: string; r: string }>(
        `SELECT access_token_enc AS a, refresh_token_enc AS r FROM connections WHERE id = $1`,
        [acme[1].id],
      );
      expect([pair.rows[0].a.slice(0, 6), pair.rows[0].r.slice(0, 6)]).toEqual(['v1.k1.', 'v1.k1.']);
    } finally {
      clearInterval(beat);
    }
    // It dies without a word: three heartbeats later its row is ignored, and the envelope format is back.
    const deadline = Date.now() + 5000;
    let secret = await rotate('acme');
    while (!(await sealedSecret('acme')).startsWith('v2.') && Date.now() < deadline) {
      await sleep(50);
      secret = await rotate('acme');
    }
    expect((await sealedSecret('acme')).startsWith('v2.1.')).toBe(true);
    expect(await standaloneVault(RING, db).open(await sealedSecret('acme'), secretRef('acme'))).toBe(secret);
    expect((await me('acme', acme[1])).status).toBe(200);
  });

  it("binds each value to its tenant: a value or a wrapped key moved to another tenant's row does not open", async () => {
    const vault = standaloneVault(RING, db);
    const fromAcme = await sealedSecret('acme');
    // The ciphertext copied to globex's row: globex's key (and binding) does not open it.
    await expect(vault.open(fromAcme, secretRef('globex'))).rejects.toThrow(VaultError);
    // acme's wrapped key copied over globex's: it does not unwrap as globex's.
    const wrapped = await db.query<{ w: string }>(`SELECT wrapped_key AS w FROM tenant_keys WHERE id = 'acme/1'`);
    const globexBefore = await db.query<{ w: string }>(`SELECT wrapped_key AS w FROM tenant_keys WHERE id = 'globex/1'`);
    await db.query(`UPDATE tenant_keys SET wrapped_key = $1 WHERE id = 'globex/1'`, [wrapped.rows[0].w]);
    try {
      await expect(standaloneVault(RING, db).open(await sealedSecret('globex'), secretRef('globex'))).rejects.toThrow(VaultError);
    } finally {
      await db.query(`UPDATE tenant_keys SET wrapped_key = $1 WHERE id = 'globex/1'`, [globexBefore.rows[0].w]);
    }
    await expect(standaloneVault(RING, db).open(await sealedSecret('globex'), secretRef('globex'))).resolves.toMatch(/^whsec_/);
  });

  it('serves cached keys while the key store is unreachable, answers 503 key_store_unavailable past the grace or uncached, and recovers', async () => {
    const keys = t.app.get(TenantKeys);
    // Renewed now, so their tokens are under their tenants' data keys.
    for (const [tenant, c] of [
      ['acme', acme[0]],
      ['globex', globex[0]],
    ] as const) {
      expect((await t.request('POST', `/v1/tenants/${tenant}/connections/${c.id}/refresh`)).status).toBe(200);
      const row = await db.query<{ a: string }>(`SELECT access_token_enc AS a FROM connections WHERE id = $1`, [c.id]);
      expect(row.rows[0].a.startsWith('v2.1.')).toBe(true);
    }
    // acme's key is cached now (a call); globex's is dropped from this instance's memory.
    expect((await rotateWithOverlap('acme')).status).toBe(201);
    keys.forget('globex');
    const down = new KeyStoreUnavailable('injected: the key store is unreachable');
    const unwrap = jest.spyOn(keys.store, 'unwrap').mockRejectedValue(down);
    const health = jest.spyOn(keys.store, 'health').mockResolvedValue('unavailable');
    try {
      expect((await rotateWithOverlap('acme')).status).toBe(201);
      for (const uncached of [await rotateWithOverlap('globex'), await me('globex', globex[0])]) {
        expect(uncached.status).toBe(503);
        expect(uncached.body.error?.code).toBe('key_store_unavailable');
        expect(Number(uncached.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      // Nothing was marked: the connection is fine, only its key is out of reach.
      const status = await db.query<{ status: string }>(`SELECT status FROM connections WHERE id = $1`, [globex[0].id]);
      expect(status.rows[0].status).toBe('active');
      const ready = await t.request<{ info?: Record<string, Record<string, string>> }>('GET', '/health/ready', { key: null });
      expect(ready.status).toBe(200);
      expect(ready.body.info?.keyStore).toEqual({ status: 'up', store: 'local', kekId: 'local:k1', state: 'unavailable' });
      expect(ready.text).not.toContain(RING.split(':')[1]);
      // Past KEY_CACHE_TTL (2 s) + KEY_CACHE_GRACE (3 s), the cached key no longer serves either.
      const deadline = Date.now() + 10_000;
      let answer = await rotateWithOverlap('acme');
      while (answer.status === 201 && Date.now() < deadline) {
        await sleep(250);
        answer = await rotateWithOverlap('acme');
      }
      expect(answer.status).toBe(503);
      expect(answer.body.error?.code).toBe('key_store_unavailable');
    } finally {
      unwrap.mockRestore();
      health.mockRestore();
    }
    // The store is back: within a second or two every tenant is served again, without a restart.
    const deadline = Date.now() + 5000;
    let back = [await rotateWithOverlap('acme'), await me('globex', globex[0])];
    while ((back[0].status !== 201 || back[1].status !== 200) && Date.now() < deadline) {
      await sleep(200);
      back = [await rotateWithOverlap('acme'), await me('globex', globex[0])];
    }
    expect(back.map((r) => r.status)).toEqual([201, 200]);
    const ready = await t.request<{ info?: Record<string, Record<string, string>> }>('GET', '/health/ready', { key: null });
    expect(ready.body.info?.keyStore.state).toBe('available');
  });

  it('destroys the data key when the tenant is deleted: its rows no longer open, even from a copy taken before', async () => {
    // A "backup" of globex's rows, taken before the deletion.
    const backup = await sealedSecret('globex');
    expect((await t.request('DELETE', '/v1/tenants/globex')).status).toBe(204);
    const key = await db.query<{ wrapped_key: string | null; destroyed_at: Date | null }>(
      `SELECT wrapped_key, destroyed_at FROM tenant_keys WHERE tenant_id = 'globex'`,
    );
    expect(key.rows).toHaveLength(1);
    expect(key.rows[0].wrapped_key).toBeNull();
    expect(key.rows[0].destroyed_at).not.toBeNull();
    await expect(standaloneVault(RING, db).open(backup, secretRef('globex'))).rejects.toThrow(/destroyed/);
    // A seal still in flight for it (a renewal, a delivery) gets no new data key: the tenant stays keyless.
    await expect(t.app.get(TokenVault).seal('late', secretRef('globex'))).rejects.toThrow(/deleted/);
    expect((await db.query(`SELECT 1 FROM tenant_keys WHERE tenant_id = 'globex'`)).rowCount).toBe(1);
    // Every other tenant is untouched.
    expect((await me('acme', acme[0])).status).toBe(200);
  });
});
