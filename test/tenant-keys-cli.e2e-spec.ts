import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import { CliModule } from '../src/cli/cli.module.js';
import { loadConfig } from '../src/config/app-config.js';
import { TenantKeysAdmin, type TenantKeyStatus } from '../src/vault/tenant-keys-admin.service.js';
import { newTenant } from './support/connect.js';
import { seedConnections, type SeededConnection } from './support/seed-connections.js';
import { sandboxEnv, startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';

// The real CLI runs under `npx tsx` (a few seconds each).
jest.setTimeout(120_000);

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const K1 = testVaultKey('k1');
const K2 = testVaultKey('k2');
const TENANTS = ['t0', 't1', 't2', 't3', 't4'];
const OPERATOR_KEY = `cwsop_test_${randomBytes(24).toString('base64url')}`;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Issue 44's key commands through the real CLI (`npm run cli -- keys ...`), as an operator runs them: status without
 * key material, a KEK rotation (refused while an instance lacks the new key, resumable, idempotent, never touching
 * a tenant's values), the old key dropped after `vault:reencrypt`, and a tenant's data key rotated.
 */
describe('keys commands (npx tsx src/cli.ts keys ...)', () => {
  let sandbox: SandboxServer;
  let databaseUrl: string;
  let db: pg.Pool;
  let app: TestApp | null = null;
  const connections = new Map<string, SeededConnection>();

  const cli = (
    vaultKeys: string,
    args: string[],
    extra: Record<string, string> = {},
  ): Promise<{ code: number | null; out: string; err: string }> => {
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-keys-cli-')),
      DATABASE_URL: databaseUrl,
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: OPERATOR_KEY,
      ...extra,
    };
    return new Promise((resolve, reject) => {
      const child = spawn('npx', ['tsx', 'src/cli.ts', ...args], { cwd: ROOT, env });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, out, err: err.replace(/^npm warn.*\n/gm, '') }));
    });
  };
  const start = (vaultKeys: string) =>
    startTestApp({
      databaseUrl,
      sandbox: false,
      env: {
        VAULT_KEYS: vaultKeys,
        OPERATOR_API_KEY: OPERATOR_KEY,
        VAULT_HEARTBEAT_MS: '250',
        REFRESH_SCHEDULER: 'off',
        KEY_CACHE_TTL: '1s',
        ...sandboxEnv(sandbox),
      },
    });
  const tenantValues = async () =>
    (
      await db.query<{ v: string }>(
        `SELECT string_agg(v, ',' ORDER BY v) AS v FROM (
           SELECT access_token_enc AS v FROM connections UNION ALL SELECT refresh_token_enc FROM connections
           UNION ALL SELECT events_secret_enc FROM tenants) s`,
      )
    ).rows[0].v;

  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    app = await start(K1);
    for (const tenant of TENANTS) {
      await newTenant(app, tenant);
      // Rows as release 0.2.0 wrote them (the ring's format) ...
      const [c] = await seedConnections(db, K1, [
        { tenantId: tenant, userId: 'u-1', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
      ]);
      connections.set(tenant, c);
    }
    // ... and two renewed by this release, under their tenants' data keys.
    for (const tenant of ['t0', 't1']) {
      expect((await app.request('POST', `/v1/tenants/${tenant}/connections/${connections.get(tenant)?.id}/refresh`)).status).toBe(200);
    }
  });

  afterAll(async () => {
    await app?.close();
    await db?.end();
    await sandbox?.close();
  });

  it('keys status: per tenant its key version, KEK and values per format, never key material', async () => {
    const res = await cli(K1, ['keys', 'status', '--json']);
    expect([res.code, res.err]).toEqual([0, '']);
    const status = JSON.parse(res.out) as { keyStore: { store: string; kekId: string }; tenants: TenantKeyStatus[] };
    expect(status.keyStore).toEqual({ store: 'local', kekId: 'local:k1' });
    const t0 = status.tenants.find((t) => t.tenantId === 't0');
    const t2 = status.tenants.find((t) => t.tenantId === 't2');
    // t0: its events secret and renewed pair under version 1; t2: its events secret under version 1, its pair in the ring's format.
    expect(t0).toMatchObject({ activeVersion: 1, kekId: 'local:k1', rows: { 'v2/1': 3 } });
    expect(t2).toMatchObject({ activeVersion: 1, kekId: 'local:k1', rows: { v1: 2, 'v2/1': 1 } });
    const wrapped = await db.query<{ w: string }>(`SELECT wrapped_key AS w FROM tenant_keys`);
    for (const secret of [K1.split(':')[1], ...wrapped.rows.map((r) => r.w.split('.')[3])]) expect(res.out).not.toContain(secret);
    const text = await cli(K1, ['keys', 'status']);
    expect(text.out).toContain('t0: key version 1, KEK local:k1, versions [1], rows v2/1=3');
  });

  it('keys rotate and set-kek refuse a tenant that does not exist, and write nothing', async () => {
    const before = await db.query<{ n: string }>(`SELECT (SELECT count(*) FROM tenant_keys) + (SELECT count(*) FROM tenant_keks) AS n`);
    for (const args of [
      ['keys', 'rotate', '--tenant', 'no-such-tenant'],
      ['keys', 'rotate', '--tenant', 'no-such-tenant', '--resume'],
      ['keys', 'set-kek', '--tenant', 'no-such-tenant', '--kek', 'any'],
    ]) {
      const res = await cli(K1, args);
      expect([res.code, res.err.trim()]).toEqual([1, 'no tenant "no-such-tenant" (or it was deleted): nothing changed.']);
    }
    const after = await db.query<{ n: string }>(`SELECT (SELECT count(*) FROM tenant_keys) + (SELECT count(*) FROM tenant_keks) AS n`);
    expect(after.rows[0].n).toBe(before.rows[0].n);
    expect((await db.query(`SELECT 1 FROM audit_log WHERE tenant_id = 'no-such-tenant'`)).rowCount).toBe(0);
  });

  it('keys rotate-kek is refused while a running instance lacks the new key', async () => {
    const res = await cli(`${K2},${K1}`, ['keys', 'rotate-kek']);
    expect(res.code).toBe(1);
    expect(res.err).toContain(app?.config.instanceId);
    const keks = await db.query<{ kek_id: string }>(`SELECT DISTINCT kek_id FROM tenant_keys`);
    expect(keks.rows).toEqual([{ kek_id: 'local:k1' }]);
  });

  it('keys rotate-kek rewraps one row per tenant, resumes after a stop, is idempotent, and never touches a value', async () => {
    await app?.close();
    app = null;
    const values = await tenantValues();
    // Stopped after two rows (an operator's Ctrl-C between rows).
    const config = loadConfig({
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-keys-')),
      VAULT_KEYS: `${K2},${K1}`,
      OPERATOR_API_KEY: OPERATOR_KEY,
      DATABASE_URL: databaseUrl,
    });
    const ctx = await NestFactory.createApplicationContext(CliModule.forRoot(config), { logger: false, abortOnError: false });
    try {
      const stop = new AbortController();
      const first = await ctx.get(TenantKeysAdmin).rotateKek(stop.signal, (done) => done >= 2 && stop.abort());
      expect(first).toEqual({ total: TENANTS.length, rewrapped: 2, skippedConcurrent: 0, complete: false });
    } finally {
      await ctx.close();
    }
    const midway = await db.query<{ kek_id: string; n: number }>(
      `SELECT kek_id, count(*)::int AS n FROM tenant_keys GROUP BY 1 ORDER BY 1`,
    );
    expect(midway.rows).toEqual([
      { kek_id: 'local:k1', n: 3 },
      { kek_id: 'local:k2', n: 2 },
    ]);
    const rest = await cli(`${K2},${K1}`, ['keys', 'rotate-kek']);
    expect([rest.code, rest.err]).toEqual([0, '']);
    expect(rest.out).toContain('rewrapped 3 data keys under local:k2');
    const after = await db.query<{ kek_id: string; w: string }>(`SELECT kek_id, wrapped_key AS w FROM tenant_keys`);
    expect(after.rows.every((r) => r.kek_id === 'local:k2' && r.w.startsWith('v1.k2.'))).toBe(true);
    expect(await tenantValues()).toBe(values);
    const again = await cli(`${K2},${K1}`, ['keys', 'rotate-kek']);
    expect([again.code, again.out.trim()]).toEqual([0, 'nothing to do: every data key is wrapped by local:k2.']);
  });

  it('after vault:reencrypt moves the ring values to tenant keys, the old key leaves VAULT_KEYS and everything still opens', async () => {
    const moved = await cli(`${K2},${K1}`, ['vault:reencrypt']);
    expect([moved.code, moved.err]).toEqual([0, '']);
    expect(moved.out).toContain("secrets to its tenant's data key");
    const ring = await db.query(`SELECT 1 FROM connections WHERE access_token_enc LIKE 'v1.%' OR refresh_token_enc LIKE 'v1.%'`);
    expect(ring.rowCount).toBe(0);
    app = await start(K2);
    for (const tenant of TENANTS) {
      const res = await app.request('GET', `/v1/tenants/${tenant}/me`, { headers: { 'x-user-id': 'u-1' } });
      expect([tenant, res.status]).toEqual([tenant, 200]);
    }
    expect((await app.request('GET', '/health/ready', { key: null })).status).toBe(200);
  });

  it("keys rotate --tenant --wait: a new data key version, the tenant's values re-sealed from the command, the old version destroyed once unused", async () => {
    const res = await cli(K2, ['keys', 'rotate', '--tenant', 't0', '--wait'], { KEY_CACHE_TTL: '1s' });
    expect([res.code, res.err]).toEqual([0, '']);
    expect(res.out).toContain('tenant t0: data key version 2, 3 values re-sealed with it.');
    const formats = await db.query<{ f: string }>(
      `SELECT DISTINCT split_part(v, '.', 1) || '.' || split_part(v, '.', 2) AS f FROM (
         SELECT access_token_enc AS v FROM connections WHERE tenant_id = 't0' UNION ALL SELECT refresh_token_enc FROM connections WHERE tenant_id = 't0'
         UNION ALL SELECT events_secret_enc FROM tenants WHERE id = 't0') s`,
    );
    expect(formats.rows).toEqual([{ f: 'v2.2' }]);
    // Other tenants are untouched.
    expect((await db.query(`SELECT 1 FROM tenant_keys WHERE tenant_id <> 't0' AND version <> 1`)).rowCount).toBe(0);
    await sleep(1200);
    // Version 1 is destroyed now by --resume, or was already by the running instance (both hold KEY_CACHE_TTL=1s).
    const resumed = await cli(K2, ['keys', 'rotate', '--tenant', 't0', '--resume'], { KEY_CACHE_TTL: '1s' });
    expect([resumed.code, resumed.err]).toEqual([0, '']);
    expect(resumed.out).toContain('tenant t0: data key version 2, 3 values re-sealed with it.');
    const keys = await db.query<{ version: number; destroyed: boolean }>(
      `SELECT version, wrapped_key IS NULL AS destroyed FROM tenant_keys WHERE tenant_id = 't0' ORDER BY version`,
    );
    expect(keys.rows).toEqual([
      { version: 1, destroyed: true },
      { version: 2, destroyed: false },
    ]);
    expect((await app?.request('GET', '/v1/tenants/t0/me', { headers: { 'x-user-id': 'u-1' } }))?.status).toBe(200);
  });

  it("vault:reencrypt passes over a deleted tenant's rows not purged yet (its data keys are destroyed), and moves the rest", async () => {
    if (!app) app = await start(K2);
    await newTenant(app, 'gone');
    await seedConnections(db, K2, [{ tenantId: 'gone', userId: 'u-1', upstreamUserId: 'carol', tokens: sandbox.issueTokens('carol') }]);
    expect((await app.request('DELETE', '/v1/tenants/gone')).status).toBe(204);
    await app.close();
    app = null;
    // A ring value of a live tenant, as an instance of 0.2.0 would still write it: this run moves it.
    const [live] = await seedConnections(db, K2, [
      { tenantId: 't1', userId: 'u-2', upstreamUserId: 'bob', tokens: sandbox.issueTokens('bob') },
    ]);
    const res = await cli(K2, ['vault:reencrypt']);
    expect([res.code, res.err]).toEqual([0, '']);
    const formats = await db.query<{ tenant_id: string; f: string }>(
      `SELECT tenant_id, split_part(access_token_enc, '.', 1) AS f FROM connections WHERE tenant_id = 'gone' OR id = $1 ORDER BY tenant_id`,
      [live.id],
    );
    expect(formats.rows).toEqual([
      { tenant_id: 'gone', f: 'v1' },
      { tenant_id: 't1', f: 'v2' },
    ]);
    const again = await cli(K2, ['vault:reencrypt']);
    expect([again.code, again.err]).toEqual([0, '']);
  });
});
