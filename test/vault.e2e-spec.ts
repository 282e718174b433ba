import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type pg from 'pg';
import { CliModule } from '../src/cli/cli.module.js';
import { loadConfig, parseVaultKeys } from '../src/config/app-config.js';
import { ConfigError } from '../src/config/config-error.js';
import { SEALED_COLUMNS } from '../src/vault/sealed-columns.js';
import { TokenVault, VaultError, type SealedRef } from '../src/vault/token-vault.service.js';
import { VaultReencryptService, type ReencryptResult } from '../src/vault/vault-reencrypt.service.js';
import { VaultRepository } from '../src/vault/vault.repository.js';
import { openPool } from './support/test-database.js';
import { startTestApp, testVaultKey } from './support/test-app.js';

// Two tests spawn `npx tsx` (a few seconds each, more under a parallel run); the project's testTimeout
// in jest.config.js does not take effect, so set it here.
jest.setTimeout(60_000);

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OLD = testVaultKey('old');
const NEW = testVaultKey('new');
const NEWEST = testVaultKey('newest');
const FINAL = testVaultKey('final');
const OPERATOR_KEY = `cwsop_test_${randomBytes(24).toString('base64url')}`;

function vaultOf(ring: string): TokenVault {
  return new TokenVault({ vaultKeys: parseVaultKeys(ring) });
}

interface Stored {
  ref: SealedRef;
  value: string;
}

/** Every non-null value of every sealed column that exists in this database. */
async function storedSecrets(db: pg.Pool): Promise<Stored[]> {
  const out: Stored[] = [];
  for (const c of SEALED_COLUMNS) {
    const exists = await db.query(
      'SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2',
      [c.table, c.column],
    );
    if (exists.rowCount === 0) continue;
    const rows = await db.query<{ id: string; value: string; tenant: string }>(
      `SELECT "${c.idColumn}"::text AS id, "${c.column}" AS value, "${c.tenantColumn}"::text AS tenant FROM "${c.table}" WHERE "${c.column}" IS NOT NULL`,
    );
    for (const r of rows.rows) out.push({ ref: { table: c.table, id: r.id, column: c.column, tenantId: r.tenant }, value: r.value });
  }
  return out;
}

function run(
  command: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // Only what the command needs: never this process's DATABASE_URL, VAULT_KEYS or the like by accident.
    const child = spawn(command, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('token vault and key rotation over real PostgreSQL (invariants 1 and 2)', () => {
  let databaseUrl: string;
  let db: pg.Pool;
  let dataDir: string;
  /** Plaintext of every secret stored, by "table.column.id". */
  const plaintexts = new Map<string, string>();
  const keyOf = (ref: SealedRef) => `${ref.table}.${ref.column}.${ref.id}`;

  async function reencrypt(ring: string, onProgress?: (done: number, total: number) => void, batchSize?: number): Promise<ReencryptResult> {
    const config = loadConfig({
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: dataDir,
      VAULT_KEYS: ring,
      OPERATOR_API_KEY: OPERATOR_KEY,
      DATABASE_URL: databaseUrl,
    });
    const ctx = await NestFactory.createApplicationContext(CliModule.forRoot(config), { logger: false, abortOnError: false });
    try {
      return await ctx.get(VaultReencryptService).reencryptAll(onProgress, { batchSize });
    } finally {
      await ctx.close();
    }
  }

  async function expectAllUnder(kid: string, ring: string): Promise<void> {
    const stored = await storedSecrets(db);
    expect(stored.length).toBe(plaintexts.size);
    const vault = vaultOf(ring);
    for (const s of stored) {
      expect(s.value.startsWith(`v1.${kid}.`)).toBe(true);
      await expect(vault.open(s.value, s.ref)).resolves.toBe(plaintexts.get(keyOf(s.ref)));
    }
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'cws-vault-e2e-'));
    const app = await startTestApp({ env: { VAULT_KEYS: OLD, VAULT_HEARTBEAT_MS: '200' } });
    databaseUrl = app.databaseUrl;
    try {
      // An instance of release 0.2.0 holding every key of these tests stays live throughout (its heartbeat is in the
      // future): so every value here is sealed with the ring, in the format it reads. Tenant keys: tenant-keys.e2e-spec.ts.
      await app.db.query(
        `INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ('release-0.2.0', '{old,new,newest,final}', now() + interval '1 day')`,
      );
      await new Promise((r) => setTimeout(r, 600));
      for (const name of ['Acme', 'Globex', 'Initech']) {
        const res = await app.request<{ id: string; eventsSecret: string }>('POST', '/v1/tenants', {
          body: { name, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
        });
        expect(res.status).toBe(201);
        plaintexts.set(
          keyOf({ table: 'tenants', id: res.body.id, column: 'events_secret_enc', tenantId: res.body.id }),
          res.body.eventsSecret,
        );
      }
    } finally {
      await app.close();
    }
    db = openPool(databaseUrl);

    // Connections are created by the OAuth callback; sealed tokens are stored here directly, as it would.
    const vault = vaultOf(OLD);
    const tenantIds = [...plaintexts.keys()].map((k) => k.split('.').slice(2).join('.'));
    const connections = [
      {
        id: randomUUID(),
        tenant: tenantIds[0],
        kind: 'user',
        userId: 'u-1',
        access: `at_${randomBytes(16).toString('hex')}`,
        refresh: `rt_${randomBytes(16).toString('hex')}`,
      },
      {
        id: randomUUID(),
        tenant: tenantIds[1],
        kind: 'admin',
        userId: null,
        access: `at_${randomBytes(16).toString('hex')}`,
        refresh: null,
      },
    ];
    for (const c of connections) {
      const access = { table: 'connections', id: c.id, column: 'access_token_enc', tenantId: c.tenant };
      const refresh = { table: 'connections', id: c.id, column: 'refresh_token_enc', tenantId: c.tenant };
      await db.query(
        `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, access_token_enc, refresh_token_enc) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          c.id,
          c.tenant,
          c.kind,
          c.userId,
          `up-${c.id}`,
          await vault.seal(c.access, access),
          c.refresh === null ? null : await vault.seal(c.refresh, refresh),
        ],
      );
      plaintexts.set(keyOf(access), c.access);
      if (c.refresh !== null) plaintexts.set(keyOf(refresh), c.refresh);
    }
  });

  afterAll(async () => {
    await db?.end();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores every secret sealed under the active key, never in plaintext', async () => {
    await expectAllUnder('old', OLD);
    const dump = await db.query<{ row: string }>(
      `SELECT row_to_json(t)::text AS row FROM tenants t UNION ALL SELECT row_to_json(c)::text FROM connections c`,
    );
    const everything = dump.rows.map((r) => r.row).join('\n');
    for (const plaintext of plaintexts.values()) expect(everything).not.toContain(plaintext);
  });

  it('does not open a ciphertext copied with SQL to another row or column (invariant 2)', async () => {
    const vault = vaultOf(OLD);
    const [a, b] = (await storedSecrets(db)).filter((s) => s.ref.table === 'tenants');
    const token = (await storedSecrets(db)).find((s) => s.ref.column === 'access_token_enc');
    if (!a || !b || !token) throw new Error('fixture rows missing');
    await db.query('UPDATE tenants SET events_secret_enc = $1 WHERE id = $2', [a.value, b.ref.id]);
    await db.query('UPDATE connections SET access_token_enc = $1 WHERE id = $2', [a.value, token.ref.id]);
    try {
      const copiedToRow = await db.query<{ v: string }>('SELECT events_secret_enc AS v FROM tenants WHERE id = $1', [b.ref.id]);
      const copiedToColumn = await db.query<{ v: string }>('SELECT access_token_enc AS v FROM connections WHERE id = $1', [token.ref.id]);
      expect(copiedToRow.rows[0].v).toBe(a.value);
      await expect(vault.open(a.value, a.ref)).resolves.toBe(plaintexts.get(keyOf(a.ref)));
      await expect(vault.open(copiedToRow.rows[0].v, b.ref)).rejects.toThrow(VaultError);
      await expect(vault.open(copiedToColumn.rows[0].v, token.ref)).rejects.toThrow(VaultError);
    } finally {
      await db.query('UPDATE tenants SET events_secret_enc = $1 WHERE id = $2', [b.value, b.ref.id]);
      await db.query('UPDATE connections SET access_token_enc = $1 WHERE id = $2', [token.value, token.ref.id]);
    }
  });

  it('re-encrypts everything to the new key with the real CLI (npx tsx src/cli.ts vault:reencrypt)', async () => {
    const ring = `${NEW},${OLD}`;
    const cliEnv = {
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      VAULT_KEYS: ring,
      OPERATOR_API_KEY: OPERATOR_KEY,
    };
    const res = await run('npx', ['tsx', 'src/cli.ts', 'vault:reencrypt'], cliEnv);
    expect({ code: res.code, stderr: res.stderr.replace(/^npm warn.*\n/gm, '') }).toEqual({ code: 0, stderr: '' });
    expect(res.stdout).toContain(`re-encrypted ${plaintexts.size} secrets to key "new"`);
    for (const secret of [...plaintexts.values(), ...ring.split(',').map((k) => k.split(':')[1])]) {
      expect(res.stdout + res.stderr).not.toContain(secret);
    }
    const leftUnderOld = (await storedSecrets(db)).filter((s) => s.value.startsWith('v1.old.'));
    expect(leftUnderOld).toEqual([]);
    // Every value opens with the new key alone: the old one can now be dropped from VAULT_KEYS.
    await expectAllUnder('new', NEW);

    const again = await run('npx', ['tsx', 'src/cli.ts', 'vault:reencrypt'], cliEnv);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing to do');
  });

  it('an interrupted re-encryption leaves every secret readable, and a re-run completes it', async () => {
    const ring = `${NEWEST},${NEW}`;
    const progress: Array<[number, number]> = [];
    const interrupted = reencrypt(
      ring,
      (done, total) => {
        progress.push([done, total]);
        if (done >= 2) throw new Error('operator pressed Ctrl-C');
      },
      2,
    );
    await expect(interrupted).rejects.toThrow('operator pressed Ctrl-C');
    expect(progress).toEqual([
      [0, plaintexts.size],
      [2, plaintexts.size],
    ]);

    const midway = await storedSecrets(db);
    const moved = midway.filter((s) => s.value.startsWith('v1.newest.'));
    expect(moved).toHaveLength(2);
    const vault = vaultOf(ring);
    for (const s of midway) await expect(vault.open(s.value, s.ref)).resolves.toBe(plaintexts.get(keyOf(s.ref)));

    const rest = await reencrypt(ring);
    expect(rest).toEqual({ total: plaintexts.size - 2, reencrypted: plaintexts.size - 2, skippedConcurrent: 0, complete: true });
    expect((await storedSecrets(db)).filter((s) => !s.value.startsWith('v1.newest.'))).toEqual([]);
    await expectAllUnder('newest', NEWEST);
    expect(await reencrypt(ring)).toEqual({ total: 0, reencrypted: 0, skippedConcurrent: 0, complete: true });
  });

  it('never overwrites a secret that a running instance rewrites during the re-encryption', async () => {
    const [target] = (await storedSecrets(db)).filter((s) => s.ref.table === 'tenants').sort((x, y) => (x.ref.id < y.ref.id ? -1 : 1));
    if (!target) throw new Error('fixture rows missing');
    // An instance still on the previous ring renews this secret, holding the row in its transaction.
    const renewedPlaintext = `whsec_${randomBytes(32).toString('base64')}`;
    const renewer = await db.connect();
    try {
      await renewer.query('BEGIN');
      await renewer.query('UPDATE tenants SET events_secret_enc = $1 WHERE id = $2', [
        await vaultOf(NEWEST).seal(renewedPlaintext, target.ref),
        target.ref.id,
      ]);
      const running = reencrypt(`${FINAL},${NEWEST}`);
      const deadline = Date.now() + 10_000;
      for (;;) {
        const waiting = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        if (waiting.rows[0].n > 0) break;
        if (Date.now() > deadline) throw new Error('the re-encryption never reached the locked row');
        await new Promise((r) => setTimeout(r, 20));
      }
      await renewer.query('COMMIT');
      plaintexts.set(keyOf(target.ref), renewedPlaintext);
      const result = await running;
      expect(result).toMatchObject({ total: plaintexts.size, reencrypted: plaintexts.size, skippedConcurrent: 1, complete: true });
    } finally {
      await renewer.query('ROLLBACK').catch(() => undefined);
      renewer.release();
    }
    await expectAllUnder('final', FINAL);
  });

  it('refuses to start, naming VAULT_KEYS, when stored secrets are under a key that is not in the ring', async () => {
    const result = reencrypt(`${testVaultKey('other')}`);
    await expect(result).rejects.toThrow(ConfigError);
    await expect(result).rejects.toThrow(/^VAULT_KEYS: the database holds secrets sealed under key "final", which VAULT_KEYS lacks/);
    await expectAllUnder('final', FINAL);
  });

  it('matches key ids literally: LIKE wildcards in a kid are escaped', async () => {
    const config = loadConfig({
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: dataDir,
      VAULT_KEYS: FINAL,
      OPERATOR_API_KEY: OPERATOR_KEY,
      DATABASE_URL: databaseUrl,
    });
    const ctx = await NestFactory.createApplicationContext(CliModule.forRoot(config), { logger: false, abortOnError: false });
    try {
      const repository = ctx.get(VaultRepository);
      const tenants = SEALED_COLUMNS.find((c) => c.table === 'tenants');
      if (!tenants) throw new Error('tenants.events_secret_enc is not in SEALED_COLUMNS');
      const count = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants')).rows[0].n;
      expect(await repository.countNotUnderKey(tenants, 'final')).toBe(0);
      expect(await repository.countNotUnderKey(tenants, 'fina_')).toBe(count);
      expect(await repository.countNotUnderKey(tenants, 'fin%')).toBe(count);
    } finally {
      await ctx.close();
    }
  });
});

describe('production without VAULT_KEYS', () => {
  it('refuses to start, naming VAULT_KEYS (npx tsx src/main.ts)', async () => {
    const res = await run('npx', ['tsx', 'src/main.ts'], {
      NODE_ENV: 'production',
      OPERATOR_API_KEY: 'x'.repeat(40),
      DATABASE_URL: 'postgres://x@127.0.0.1:1/db',
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('VAULT_KEYS');
    expect(res.stdout).not.toContain('ready');
  });
});
