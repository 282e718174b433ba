import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { SEALED_COLUMNS } from '../src/vault/sealed-columns.js';
import type { TenantKeyStatus } from '../src/vault/tenant-keys-admin.service.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { newTenantAt } from './support/connect.js';
import { seedConnections } from './support/seed-connections.js';
import { buildApp, ROOT, spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { standaloneVault } from './support/standalone-vault.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';
import { waitUntil } from './support/webhook-sink.js';

jest.setTimeout(300_000);

const K1 = testVaultKey('r1');
const K2 = testVaultKey('r2');
/** The rotated tenant's synced records and changes: enough batches of the re-seal to kill it part way. */
const RECORDS = 600;
const OPERATOR_KEY = `cwsop_test_${randomBytes(24).toString('base64url')}`;

interface Sealed {
  table: string;
  column: string;
  id: string;
  tenantId: string;
  value: string;
}

/**
 * `keys rotate --tenant` re-sealed by the running instances (docs/keys.md, "Rotating a tenant's data key"): the
 * command records the rotation; an instance (a separate process) re-seals the tenant's values in every sealed column
 * in the background, is SIGKILLed part way, and the instances started after it take the re-seal over from its stored
 * progress once its lease runs out, then destroy the old version. No other tenant's value moves, every value opens to
 * what it held. And the audit row of each key operation: the rotation, its re-seal and retirement, a tenant's keys
 * destroyed with it, a KEK rotation, a re-encryption to the tenants' keys and back to the ring.
 */
describe('tenant data key rotation: re-sealed in the background by the instances, audited', () => {
  let sandbox: SandboxServer;
  let databaseUrl: string;
  let db: pg.Pool;
  let env: Record<string, string>;
  const instances: SpawnedApp[] = [];
  let before = new Map<string, string>();

  const cli = (vaultKeys: string, args: string[]): Promise<{ code: number | null; out: string; err: string }> => {
    const childEnv = { ...env, PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'test', VAULT_KEYS: vaultKeys };
    return new Promise((resolve, reject) => {
      const child = spawn('npx', ['tsx', 'src/cli.ts', ...args], { cwd: ROOT, env: childEnv });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, out, err: err.replace(/^npm warn.*\n/gm, '') }));
    });
  };
  const start = async (instanceId: string, vaultKeys = K1) => {
    const app = await spawnApp({ ...env, INSTANCE_ID: instanceId, VAULT_KEYS: vaultKeys }, { readyTimeoutMs: 60_000 });
    instances.push(app);
    return app;
  };
  /** Every sealed value of the tenants, by table, column and row. */
  const sealedValues = async (tenants: string[]): Promise<Sealed[]> => {
    const out: Sealed[] = [];
    for (const col of SEALED_COLUMNS) {
      const { rows } = await db.query<{ id: string; tenant: string; value: string }>(
        `SELECT "${col.idColumn}"::text AS id, "${col.tenantColumn}"::text AS tenant, "${col.column}" AS value
           FROM "${col.table}" WHERE "${col.column}" IS NOT NULL AND "${col.tenantColumn}"::text = ANY($1)`,
        [tenants],
      );
      for (const r of rows) out.push({ table: col.table, column: col.column, id: r.id, tenantId: r.tenant, value: r.value });
    }
    return out;
  };
  const key = (s: Sealed) => `${s.table}.${s.column}:${s.id}`;
  /** What every value opens to, through a vault with nothing cached (the ring `vaultKeys`, tenant keys from the database). */
  const plaintexts = async (tenants: string[], vaultKeys = K1): Promise<Map<string, string>> => {
    const vault = standaloneVault(vaultKeys, db);
    const out = new Map<string, string>();
    for (const s of await sealedValues(tenants))
      out.set(key(s), await vault.open(s.value, { table: s.table, id: s.id, column: s.column, tenantId: s.tenantId }));
    return out;
  };
  const reseal = async (tenantId: string) =>
    (
      await db.query<{
        version: number;
        resealed: string;
        column_index: number;
        after_id: string | null;
        lease_owner: string | null;
        finished: boolean;
      }>(
        `SELECT version, resealed, column_index, after_id, lease_owner, finished_at IS NOT NULL AS finished FROM tenant_key_reseals WHERE tenant_id = $1`,
        [tenantId],
      )
    ).rows[0];
  const auditRows = async (actions: string[]) =>
    (
      await db.query<{
        action: string;
        actor_kind: string;
        actor_id: string | null;
        tenant_id: string | null;
        outcome: string;
        details: Record<string, unknown> | null;
      }>(`SELECT action, actor_kind, actor_id, tenant_id, outcome, details FROM audit_log WHERE action = ANY($1) ORDER BY at, action`, [
        actions,
      ])
    ).rows;

  beforeAll(async () => {
    buildApp();
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    env = spawnedEnv('reseal', databaseUrl, sandbox, OPERATOR_KEY, {
      VAULT_HEARTBEAT_MS: '250',
      KEY_CACHE_TTL: '1s',
      REFRESH_SCHEDULER: 'off',
      SYNC_WORKFLOWS: 'off',
    });
    const first = await start('reseal-a');
    for (const tenant of ['ta', 'tb', 'tc']) await newTenantAt(first.url, OPERATOR_KEY, tenant);
    // Rows in every sealed column, in the ring's format (as release 0.2.0 wrote them): the rotated tenant's many, another's few.
    const ring = new TokenVault({ vaultKeys: parseVaultKeys(K1) });
    for (const [tenant, n] of [
      ['ta', RECORDS],
      ['tb', 3],
    ] as const) {
      const seal = (table: string, id: string, column: string) =>
        ring.seal(`${table}.${column} of ${id}: ${randomUUID()}`, { table, id, column, tenantId: tenant });
      await db.query(`UPDATE tenants SET events_secret_prev_enc = $2 WHERE id = $1`, [
        tenant,
        await seal('tenants', tenant, 'events_secret_prev_enc'),
      ]);
      const conns = await seedConnections(
        db,
        K1,
        Array.from({ length: 5 }, (_, i) => ({
          tenantId: tenant,
          userId: `u-${i}`,
          upstreamUserId: 'alice',
          tokens: sandbox.issueTokens('alice'),
        })),
      );
      for (let i = 0; i < 4; i++) {
        const id = randomUUID();
        await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, 'bearer', $3)`, [
          id,
          tenant,
          await seal('webhook_receivers', id, 'secret_enc'),
        ]);
        const endpoint = randomUUID();
        await db.query(
          `INSERT INTO event_endpoints (id, tenant_id, url, secret_enc, secret_prev_enc) VALUES ($1, $2, 'https://hooks.example/e', $3, $4)`,
          [
            endpoint,
            tenant,
            await seal('event_endpoints', endpoint, 'secret_enc'),
            await seal('event_endpoints', endpoint, 'secret_prev_enc'),
          ],
        );
      }
      for (let i = 0; i < n; i += 200) {
        const records: unknown[] = [];
        const changes: unknown[] = [];
        const tuples: string[] = [];
        for (let j = i; j < Math.min(n, i + 200); j++) {
          const conn = conns[j % conns.length];
          const sealedId = `${tenant}/${conn.userId}/wf-${j}`;
          const p = records.length;
          tuples.push(`($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5})`);
          records.push(conn.id, `wf-${j}`, tenant, conn.userId, await seal('records', sealedId, 'data_enc'));
          changes.push(conn.id, `wf-${j}`, tenant, conn.userId, await seal('record_changes', sealedId, 'data_enc'));
        }
        await db.query(
          `INSERT INTO records (connection_id, workflow_id, tenant_id, user_id, data_enc) VALUES ${tuples.join(', ')}`,
          records,
        );
        await db.query(
          `INSERT INTO record_changes (connection_id, workflow_id, tenant_id, user_id, data_enc, action) VALUES ${tuples.map((t) => t.replace(/\)$/, ", 'added')")).join(', ')}`,
          changes,
        );
      }
    }
    before = await plaintexts(['ta', 'tb']);
  }, 240_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGTERM').catch(() => null)));
    await db?.end();
    await sandbox?.close();
  }, 60_000);

  it('every sealed column holds rows of both tenants, in the ring format or under version 1', async () => {
    const values = await sealedValues(['ta', 'tb']);
    for (const col of SEALED_COLUMNS)
      for (const tenant of ['ta', 'tb'])
        expect([
          col.table,
          col.column,
          tenant,
          values.some((v) => v.table === col.table && v.column === col.column && v.tenantId === tenant),
        ]).toEqual([col.table, col.column, tenant, true]);
    expect(values.every((v) => v.value.startsWith('v1.') || v.value.startsWith('v2.1.'))).toBe(true);
    expect(values.filter((v) => v.tenantId === 'ta').length).toBeGreaterThan(2 * RECORDS);
  });

  it('keys rotate --tenant returns at once; the instance re-seals; a SIGKILL part way, and the next instances finish from the stored progress', async () => {
    const tbBefore = (await sealedValues(['tb'])).map((v) => `${key(v)}=${v.value}`).sort();
    const rotated = await cli(K1, ['keys', 'rotate', '--tenant', 'ta']);
    expect([rotated.code, rotated.err]).toEqual([0, '']);
    expect(rotated.out).toContain('tenant ta: data key version 2');
    expect(rotated.out).toContain('the running instances re-seal its values in the background');
    // The instance has taken it and stored some progress: kill it there.
    await waitUntil('the instance re-sealed part of the tenant', async () => Number((await reseal('ta'))?.resealed ?? 0) >= 100, 60_000);
    await instances[0].stop('SIGKILL');
    const midway = await reseal('ta');
    expect(midway).toMatchObject({ version: 2, lease_owner: 'reseal-a', finished: false });
    expect(midway.column_index > 0 || midway.after_id !== null).toBe(true);
    const values = await sealedValues(['ta']);
    const moved = values.filter((v) => v.value.startsWith('v2.2.')).length;
    expect(moved).toBeGreaterThan(0);
    expect(moved).toBeLessThan(values.length);
    const status = await cli(K1, ['keys', 'status', '--json']);
    const ta = (JSON.parse(status.out) as { tenants: TenantKeyStatus[] }).tenants.find((t) => t.tenantId === 'ta');
    expect(ta?.reseal).toMatchObject({ version: 2, state: 're-sealing', left: values.length - moved });
    // Two instances, after the dead one's lease: one of them takes the re-seal over.
    await Promise.all([start('reseal-b'), start('reseal-c')]);
    await waitUntil('the re-seal finished', async () => (await reseal('ta'))?.finished === true || null, 180_000, 100);
    // Taken over from the stored progress: the count goes on from where the killed instance stored it.
    const done = await reseal('ta');
    expect(Number(done.resealed)).toBeGreaterThanOrEqual(Number(midway.resealed));
    expect(Number(done.resealed)).toBeLessThanOrEqual(values.length);
    // Every value of the rotated tenant, in every sealed column, is under version 2; the other tenant's are as they were.
    const after = await sealedValues(['ta']);
    expect(after.length).toBe(values.length);
    expect(after.filter((v) => !v.value.startsWith('v2.2.')).map(key)).toEqual([]);
    expect((await sealedValues(['tb'])).map((v) => `${key(v)}=${v.value}`).sort()).toEqual(tbBefore);
    const keys = await db.query<{ tenant_id: string; version: number; destroyed: boolean }>(
      `SELECT tenant_id, version, wrapped_key IS NULL AS destroyed FROM tenant_keys WHERE tenant_id IN ('ta', 'tb') ORDER BY 1, 2`,
    );
    expect(keys.rows).toEqual([
      { tenant_id: 'ta', version: 1, destroyed: true },
      { tenant_id: 'ta', version: 2, destroyed: false },
      { tenant_id: 'tb', version: 1, destroyed: false },
    ]);
    // Every value opens to what it held, through a vault with nothing cached.
    expect(await plaintexts(['ta', 'tb'])).toEqual(before);
    const final = await cli(K1, ['keys', 'status', '--json']);
    const taDone = (JSON.parse(final.out) as { tenants: TenantKeyStatus[] }).tenants.find((t) => t.tenantId === 'ta');
    expect(taDone?.reseal).toMatchObject({ version: 2, state: 'done', left: 0, retired: [1] });
  });

  it('the rotation, its re-seal and the destroyed version are audited: ids, versions and counts, never a key', async () => {
    const rows = await auditRows(['tenant_key.rotated', 'tenant_key.resealed', 'tenant_key.retired']);
    expect(rows).toEqual([
      {
        action: 'tenant_key.rotated',
        actor_kind: 'operator',
        actor_id: 'cli',
        tenant_id: 'ta',
        outcome: 'success',
        details: { version: 2, previous: 1 },
      },
      {
        action: 'tenant_key.resealed',
        actor_kind: 'service',
        actor_id: null,
        tenant_id: 'ta',
        outcome: 'success',
        details: { version: 2, resealed: expect.any(Number) },
      },
      {
        action: 'tenant_key.retired',
        actor_kind: 'service',
        actor_id: null,
        tenant_id: 'ta',
        outcome: 'success',
        details: { version: 2, retired: [1] },
      },
    ]);
    // Through the audit route too, with its details.
    const res = await fetch(`${instances[1].url}/v1/audit?tenantId=ta`, { headers: { authorization: `Bearer ${OPERATOR_KEY}` } });
    const page = (await res.json()) as { items: Array<{ action: string; details: Record<string, unknown> | null }> };
    expect(page.items.find((i) => i.action === 'tenant_key.retired')?.details).toEqual({ version: 2, retired: [1] });
  });

  it('a KEK rotation, a re-encryption to the tenant keys and one back to the ring write their start and finish rows', async () => {
    await Promise.all(instances.map((i) => i.stop('SIGTERM').catch(() => null)));
    const kek = await cli(`${K2},${K1}`, ['keys', 'rotate-kek']);
    expect([kek.code, kek.err]).toEqual([0, '']);
    const live = Number(
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tenant_keys WHERE wrapped_key IS NOT NULL`)).rows[0].n,
    );
    const moved = await cli(`${K2},${K1}`, ['vault:reencrypt']);
    expect([moved.code, moved.err]).toEqual([0, '']);
    const ringValues = (await sealedValues(['tb'])).length;
    const back = await cli(`${K2},${K1}`, ['vault:reencrypt', '--to-ring']);
    expect([back.code, back.err]).toEqual([0, '']);
    const rows = await auditRows(['kek.rotation_started', 'kek.rotation_finished', 'vault.reencrypt_started', 'vault.reencrypt_finished']);
    const cliActor = { actor_kind: 'operator', actor_id: 'cli', tenant_id: null, outcome: 'success' };
    expect(rows.slice(0, 2)).toEqual([
      { action: 'kek.rotation_started', ...cliActor, details: { kekId: 'local:r2', total: live } },
      {
        action: 'kek.rotation_finished',
        ...cliActor,
        details: { kekId: 'local:r2', total: live, rewrapped: live, skippedConcurrent: 0, complete: true },
      },
    ]);
    const reencrypts = rows.filter((r) => r.action.startsWith('vault.'));
    expect(reencrypts[0]).toEqual({
      action: 'vault.reencrypt_started',
      ...cliActor,
      details: { target: 'tenant-keys', kid: 'r2', total: expect.any(Number) },
    });
    expect(reencrypts[1]).toMatchObject({
      action: 'vault.reencrypt_finished',
      ...cliActor,
      details: { target: 'tenant-keys', kid: 'r2', complete: true },
    });
    expect(reencrypts.slice(-2)).toEqual([
      { action: 'vault.reencrypt_started', ...cliActor, details: { target: 'ring', kid: 'r2', total: expect.any(Number) } },
      {
        action: 'vault.reencrypt_finished',
        ...cliActor,
        details: expect.objectContaining({ target: 'ring', complete: true }) as Record<string, unknown>,
      },
    ]);
    expect(ringValues).toBeGreaterThan(0);
    // No key material in any key operation's row.
    const all = JSON.stringify(await db.query(`SELECT * FROM audit_log`).then((r) => r.rows));
    const wrapped = await db.query<{ w: string | null }>(`SELECT wrapped_key AS w FROM tenant_keys`);
    for (const secret of [K1.split(':')[1], K2.split(':')[1], ...wrapped.rows.flatMap((r) => (r.w ? [r.w] : []))])
      expect(all).not.toContain(secret);
    // Everything still opens, now from the ring.
    expect(await plaintexts(['ta', 'tb'], `${K2},${K1}`)).toEqual(before);
  });
  it('deleting a tenant writes the destruction of its data keys', async () => {
    // An instance with the new ring (the last step left it on the ring's format).
    const app = await start('reseal-d', `${K2},${K1}`);
    const res = await fetch(`${app.url}/v1/tenants/tc`, { method: 'DELETE', headers: { authorization: `Bearer ${OPERATOR_KEY}` } });
    expect(res.status).toBe(204);
    expect(await auditRows(['tenant_key.destroyed'])).toEqual([
      {
        action: 'tenant_key.destroyed',
        actor_kind: 'operator',
        actor_id: 'operator',
        tenant_id: 'tc',
        outcome: 'success',
        details: { versions: 1 },
      },
    ]);
  });
});
