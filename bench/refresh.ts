// Renewal throughput against the sandbox's own token endpoint throughput, measured in the same run.
//
//   npx tsx bench/refresh.ts
//
// Env: DATABASE_URL (a PostgreSQL server; default postgres://postgres@127.0.0.1:5432/postgres; a fresh
// database is created and dropped), BENCH_CONNECTIONS (10000), BENCH_CONCURRENCY (16: the app's
// REFRESH_CONCURRENCY and the baseline's parallel calls), BENCH_BATCH (100: REFRESH_BATCH_SIZE).
// The sandbox runs in its own process (tsx src/sandbox/standalone.ts), the app as a compiled process
// (node dist/src/main.js, built first: NestJS needs decorator metadata, which tsx does not emit).
// Not part of `npm test`.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Pool } from 'undici';
import { runMigrations } from '../src/database/migrate.js';
import { seedConnections, type IssuedPair } from '../test/support/seed-connections.js';
import { buildApp, freePort, spawnApp, type SpawnedApp } from '../test/support/spawn-app.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.env.BENCH_CONNECTIONS ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const CLIENT_ID = 'cws-bench';
const CLIENT_SECRET = randomBytes(24).toString('base64url');

async function main(): Promise<void> {
  const dbName = `cws_bench_${randomBytes(4).toString('hex')}`;
  const databaseUrl = withDatabase(SERVER_URL, dbName);
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  let sandbox: { proc: ChildProcess; url: string } | null = null;
  let app: SpawnedApp | null = null;
  const db = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  try {
    await runMigrations(databaseUrl);
    sandbox = await startSandbox();
    const http = new Pool(sandbox.url, { connections: CONCURRENCY * 2, pipelining: 1 });
    const issue = async (userId: string): Promise<IssuedPair> => {
      const res = await http.request({ method: 'POST', path: '/_sandbox/tokens', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId }) });
      if (res.statusCode !== 200) throw new Error(`POST /_sandbox/tokens answered ${res.statusCode}`);
      return (await res.body.json()) as IssuedPair;
    };
    const users = ['admin', 'alice', 'bob', 'carol', 'dave'];

    // (a) The sandbox alone: direct refresh calls at the same concurrency, each on a fresh grant.
    const grants = await inParallel(N, 32, (i) => issue(users[i % users.length]));
    const baseStart = performance.now();
    await inParallel(N, CONCURRENCY, async (i) => {
      const res = await http.request({
        method: 'POST',
        path: '/oauth/token',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: grants[i].refresh_token, client_id: CLIENT_ID, client_secret: CLIENT_SECRET }),
      });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`the sandbox refused a refresh: ${res.statusCode}`);
    });
    const sandboxRate = N / ((performance.now() - baseStart) / 1000);

    // (b) cws-connect's real path: the scheduler of one instance renews N due connections.
    buildApp();
    const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
    const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;
    app = await spawnApp(
      {
        DATABASE_URL: databaseUrl,
        DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-bench-')),
        NODE_ENV: 'test',
        SANDBOX: 'off',
        CWS_SANDBOX_AUTH_URL: sandbox.url,
        CWS_SANDBOX_CLIENT_ID: CLIENT_ID,
        CWS_SANDBOX_CLIENT_SECRET: CLIENT_SECRET,
        CWS_SANDBOX_SCOPES: 'workflows.read workflows.write webhooks.manage userinfo.read',
        VAULT_KEYS: vaultKeys,
        OPERATOR_API_KEY: operatorKey,
        REFRESH_INTERVAL_MS: '100',
        REFRESH_BATCH_SIZE: String(BATCH),
        REFRESH_CONCURRENCY: String(CONCURRENCY),
        LOG_LEVEL: 'warn',
      },
      { readyTimeoutMs: 60_000 },
    );
    const tenant = await fetch(`${app.url}/v1/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'bench', name: 'Bench', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
    });
    if (tenant.status !== 201) throw new Error(`tenant creation answered ${tenant.status}`);
    const pairs = await inParallel(N, 32, (i) => issue(users[i % users.length]));
    const later = new Date(Date.now() + 86_400_000);
    await seedConnections(
      db,
      vaultKeys,
      pairs.map((tokens, i) => ({ tenantId: 'bench', userId: `u-${i}`, upstreamUserId: users[i % users.length], tokens, dueAt: later })),
    );
    const before = await stats(http);
    const start = performance.now();
    await db.query(`UPDATE connections SET refresh_due_at = now()`);
    for (;;) {
      const done = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE last_refreshed_at IS NOT NULL`);
      if (done.rows[0].n >= N) break;
      if (performance.now() - start > 600_000) throw new Error(`only ${done.rows[0].n} of ${N} renewed in 10 minutes`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const seconds = (performance.now() - start) / 1000;
    const after = await stats(http);
    const renewRate = N / seconds;
    const bad = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE status <> 'active' OR refresh_failures > 0`);
    await http.close();

    console.log(
      `sandbox token endpoint alone: ${sandboxRate.toFixed(0)} refreshes/s at concurrency ${CONCURRENCY}; ` +
        `cws-connect (1 instance, scheduler, lease + CAS per connection): ${N} renewals in ${seconds.toFixed(2)} s = ${renewRate.toFixed(0)} renewals/s ` +
        `(sandbox saw ${after.refreshes - before.refreshes} refreshes, ${after.refreshReuses - before.refreshReuses} reuses; ${bad.rows[0].n} connections not active or failed)`,
    );
    console.log(`RESULT refresh: ratio ${(renewRate / sandboxRate).toFixed(2)} (goal >= 0.3) — ${renewRate.toFixed(0)} renewals/s vs ${sandboxRate.toFixed(0)} sandbox refreshes/s`);
  } finally {
    await app?.stop('SIGTERM');
    sandbox?.proc.kill('SIGTERM');
    await db.end();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

async function startSandbox(): Promise<{ proc: ChildProcess; url: string }> {
  const port = await freePort();
  const proc = spawn(join(ROOT, 'node_modules', '.bin', 'tsx'), ['src/sandbox/standalone.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      SANDBOX_PORT: String(port),
      SANDBOX_RECORD_LIMIT: '0',
      SANDBOX_TOKEN_TTL_SECONDS: '21600',
      SANDBOX_CLIENT_ID: CLIENT_ID,
      SANDBOX_CLIENT_SECRET: CLIENT_SECRET,
      SANDBOX_REDIRECT_URIS: 'http://127.0.0.1:1/oauth/callback',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`the sandbox exited with ${code}`)));
    proc.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('listening')) resolve();
    });
  });
  return { proc, url: `http://127.0.0.1:${port}` };
}

async function stats(http: Pool): Promise<{ refreshes: number; refreshReuses: number }> {
  const res = await http.request({ method: 'GET', path: '/_sandbox/stats' });
  return (await res.body.json()) as { refreshes: number; refreshReuses: number };
}

async function inParallel<T>(n: number, concurrency: number, work: (i: number) => Promise<T>): Promise<T[]> {
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

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
