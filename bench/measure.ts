// What the benches that run the compiled service on a seeded database share (bench/scale-run.ts,
// bench/tenant-delete.ts): a scratch database, the standalone sandbox, the app started on that database, a
// webhook receiver written through SQL, and the measurements (CPU per operation from /proc, p99, RSS).
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { freePort } from '../src/common/free-port.js';
import { runMigrations } from '../src/database/migrate.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { withDatabase } from '../test/support/database-setup.js';
import { spawnApp, type SpawnedApp } from '../test/support/spawn-app.js';
import { cpuMs, databaseCpu, databaseCpuSince, ready, start } from './harness.js';

export const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CLIENT_ID = 'cws-bench';
const CLIENT_SECRET = randomBytes(24).toString('base64url');

export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

export function p99(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

export async function inParallel<T>(n: number, concurrency: number, work: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await work(i);
      }
    }),
  );
  return out;
}

/**
 * CPU of the app's process and its PostgreSQL backends over `work`, in µs per operation; `lane` is the share of
 * the database's that renewal's commit lane spent (its backend names itself `cws-connect <instance> renewal`: the
 * saves of new pairs), the rest being the pool's (claims, lookups, everything else) and the change listener's; `ms`
 * the wall time `work` took.
 */
export async function cpuPerOp(
  db: pg.Client,
  database: string,
  pid: number,
  work: () => Promise<number>,
): Promise<{ app: number; db: number; lane: number; ops: number; ms: number }> {
  const appBefore = cpuMs(pid);
  const dbBefore = await databaseCpu(db, database, 'cws-connect%');
  const laneBefore = await databaseCpu(db, database, 'cws-connect % renewal');
  const t = performance.now();
  const ops = Math.max(1, await work());
  const ms = performance.now() - t;
  const dbMs = databaseCpuSince(dbBefore, await databaseCpu(db, database, 'cws-connect%'));
  const laneMs = databaseCpuSince(laneBefore, await databaseCpu(db, database, 'cws-connect % renewal'));
  return { app: ((cpuMs(pid) - appBefore) * 1000) / ops, db: (dbMs * 1000) / ops, lane: (laneMs * 1000) / ops, ops, ms };
}

export async function timed(url: string, headers: Record<string, string>): Promise<{ ms: number; body: string }> {
  const t = performance.now();
  const res = await fetch(url, { headers });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${body}`);
  return { ms: performance.now() - t, body };
}

export interface ScratchDatabase {
  name: string;
  url: string;
  /** A client on it (application_name `cws-bench`, so its own CPU is not counted as the service's). */
  db: pg.Client;
  drop(): Promise<void>;
}

/** A database of its own on SERVER_URL, migrated; drop() removes it. */
export async function scratchDatabase(prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(SERVER_URL, name);
  const db = new pg.Client({ connectionString: url, application_name: 'cws-bench' });
  await db.connect();
  await runMigrations(url);
  return {
    name,
    url,
    db,
    async drop() {
      await db.end().catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    },
  };
}

export interface BenchSandbox {
  url: string;
  proc: ChildProcess;
  /** A fresh pair for `userId`, straight from the sandbox. */
  tokens(userId: string): Promise<{ access_token: string; refresh_token: string; expiresIn: number }>;
}

/** The standalone sandbox in its own process, no call records kept, 6-hour access tokens. */
export async function startSandbox(): Promise<BenchSandbox> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = start('sandbox', ['--import', 'tsx', 'packages/cws-sandbox/src/standalone.ts'], {
    SANDBOX_PORT: String(port),
    SANDBOX_CLIENT_ID: CLIENT_ID,
    SANDBOX_CLIENT_SECRET: CLIENT_SECRET,
    SANDBOX_REDIRECT_URIS: 'http://127.0.0.1:1/oauth/callback',
    SANDBOX_RECORD_LIMIT: '0',
    SANDBOX_TOKEN_TTL_SECONDS: '21600',
  });
  await ready(`${url}/_sandbox/users`);
  return {
    url,
    proc,
    async tokens(userId) {
      const res = await fetch(`${url}/_sandbox/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userId }),
      });
      if (res.status !== 200) throw new Error(`the sandbox answered ${res.status}`);
      return (await res.json()) as { access_token: string; refresh_token: string; expiresIn: number };
    },
  };
}

/** The compiled service (production mode) on `databaseUrl`, the sandbox as its upstream. */
export async function startBenchApp(
  databaseUrl: string,
  sandbox: BenchSandbox,
  vaultKeys: string,
  env: Record<string, string> = {},
): Promise<{ app: SpawnedApp; operatorKey: string }> {
  const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;
  const app = await spawnApp(
    {
      DATABASE_URL: databaseUrl,
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-bench-')),
      NODE_ENV: 'production',
      PUBLIC_URL: 'http://127.0.0.1:1',
      SANDBOX: 'off',
      CWS_SANDBOX_AUTH_URL: sandbox.url,
      CWS_SANDBOX_CLIENT_ID: CLIENT_ID,
      CWS_SANDBOX_CLIENT_SECRET: CLIENT_SECRET,
      CWS_SANDBOX_SCOPES: 'workflows.read workflows.write webhooks.manage userinfo.read',
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: operatorKey,
      LOG_LEVEL: 'warn',
      ...env,
    },
    { readyTimeoutMs: 120_000 },
  );
  return { app, operatorKey };
}

/** A bearer webhook receiver of `tenantId`, written through SQL: answers its id and the Authorization to send. */
export async function addReceiver(db: pg.Client, vaultKeys: string, tenantId: string): Promise<{ id: string; authorization: string }> {
  const id = randomUUID();
  const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
  const sealed = await new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) }).seal(authorization, {
    table: 'webhook_receivers',
    id,
    column: 'secret_enc',
    tenantId,
  });
  await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, 'bearer', $3)`, [
    id,
    tenantId,
    sealed,
  ]);
  return { id, authorization };
}

/** A tenant API key, made through the API with the operator key. */
export async function tenantKey(appUrl: string, operatorKey: string, tenantId: string): Promise<string> {
  const res = await fetch(`${appUrl}/v1/tenants/${tenantId}/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
    body: '{}',
  });
  if (res.status !== 201) throw new Error(`api-keys answered ${res.status}`);
  return ((await res.json()) as { key: string }).key;
}
