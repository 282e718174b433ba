// Keyset paging of one tenant's connections: the first page against the last page, in the same run.
//
//   npx tsx bench/connections-paging.ts
//
// Env: DATABASE_URL (a PostgreSQL server; default postgres://postgres@127.0.0.1:5432/postgres; a fresh
// database is created and dropped), BENCH_CONNECTIONS (100000 connections of one tenant), BENCH_LIMIT (100 per
// page), BENCH_SAMPLES (41 timed requests of each page, alternating first and last).
//
// The tenant's connections are seeded straight into the database (sealed like real ones), the app runs as a
// compiled process, and the whole listing is walked once through `next` to find the last page's cursor. Then
// the first and the last page are requested alternately and the medians compared: a listing that pages in
// constant time shows a ratio near 1 (OFFSET paging would grow with the depth). Not part of `npm test`.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { runMigrations } from '../src/database/migrate.js';
import { withDatabase } from '../test/support/database-setup.js';
import { seedConnections } from '../test/support/seed-connections.js';
import { buildApp, spawnApp, type SpawnedApp } from '../test/support/spawn-app.js';
import './harness.js'; // prints the runtime this bench runs on

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.env.BENCH_CONNECTIONS ?? 100_000);
const LIMIT = Number(process.env.BENCH_LIMIT ?? 100);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 41);

async function main(): Promise<void> {
  const dbName = `cws_bench_${randomBytes(4).toString('hex')}`;
  const databaseUrl = withDatabase(SERVER_URL, dbName);
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  db.on('error', () => undefined);
  let app: SpawnedApp | null = null;
  try {
    await runMigrations(databaseUrl);
    const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
    const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;
    buildApp();
    app = await spawnApp({
      NODE_ENV: 'test',
      DATABASE_URL: databaseUrl,
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: operatorKey,
      SANDBOX: 'off',
      REFRESH_SCHEDULER: 'off',
      // The environment must be configured for the tenant to exist; nothing here calls it.
      CWS_SANDBOX_AUTH_URL: 'http://127.0.0.1:9',
      CWS_SANDBOX_CLIENT_ID: 'bench',
      CWS_SANDBOX_CLIENT_SECRET: 'bench-secret',
    });
    const headers = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };
    const created = await fetch(`${app.url}/v1/tenants`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ id: 'bench', name: 'Bench', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
    });
    if (created.status !== 201) throw new Error(`tenant creation answered ${created.status}`);

    const seedStarted = performance.now();
    const tokens = {
      access_token: 'bench-access',
      refresh_token: 'bench-refresh',
      expiresIn: 21600,
      scope: ['workflows'],
      family: 'bench',
    };
    const base = Date.now() - 86_400_000;
    const items = Array.from({ length: N }, (_, i) => ({
      tenantId: 'bench',
      userId: `u-${i}`,
      upstreamUserId: 'alice',
      tokens,
      issuedAt: new Date(base + i),
    }));
    await seedConnections(db, vaultKeys, items);
    await db.query('VACUUM ANALYZE connections');
    console.log(`seeded ${N} connections in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`);

    const page = async (after: string | null): Promise<{ ms: number; next: string | null; count: number }> => {
      const started = performance.now();
      const res = await fetch(`${app!.url}/v1/tenants/bench/connections?limit=${LIMIT}${after ? `&after=${after}` : ''}`, { headers });
      const body = (await res.json()) as { connections: unknown[]; next: string | null };
      if (res.status !== 200) throw new Error(`a page answered ${res.status}`);
      return { ms: performance.now() - started, next: body.next, count: body.connections.length };
    };

    // Walk the whole listing once: every row once, and the cursor of the last page.
    const walkStarted = performance.now();
    let after: string | null = null;
    let lastCursor: string | null = null;
    let rows = 0;
    let pages = 0;
    for (;;) {
      const p = await page(after);
      rows += p.count;
      pages++;
      if (!p.next) {
        lastCursor = after;
        break;
      }
      after = p.next;
    }
    if (rows !== N) throw new Error(`the walk saw ${rows} rows, not ${N}`);
    console.log(`walked ${pages} pages of ${LIMIT} (${rows} rows) in ${((performance.now() - walkStarted) / 1000).toFixed(1)} s`);

    const first: number[] = [];
    const last: number[] = [];
    for (let i = 0; i < 5; i++) {
      await page(null);
      await page(lastCursor);
    }
    for (let i = 0; i < SAMPLES; i++) {
      // Alternate the order so that neither side always runs right after the other.
      if (i % 2 === 0) {
        first.push((await page(null)).ms);
        last.push((await page(lastCursor)).ms);
      } else {
        last.push((await page(lastCursor)).ms);
        first.push((await page(null)).ms);
      }
    }
    const plan = await db.query(
      `EXPLAIN SELECT id FROM connections c WHERE c.tenant_id = 'bench' AND (c.created_at, c.id) > (now() - interval '1 hour', '00000000-0000-4000-8000-000000000000'::uuid) ORDER BY c.created_at, c.id LIMIT ${LIMIT + 1}`,
    );
    console.log(`plan of a later page: ${(plan.rows as Array<{ 'QUERY PLAN': string }>).map((r) => r['QUERY PLAN'].trim()).join(' / ')}`);
    const mf = median(first);
    const ml = median(last);
    console.log(
      `first page: median ${mf.toFixed(2)} ms (p90 ${pct(first, 0.9).toFixed(2)} ms); last page (${pages}th): median ${ml.toFixed(2)} ms (p90 ${pct(last, 0.9).toFixed(2)} ms)`,
    );
    console.log(
      `RESULT connections-paging: last/first page latency ratio ${(ml / mf).toFixed(2)} over ${N} connections, ${LIMIT} per page, ${SAMPLES} samples each`,
    );
  } finally {
    await app?.stop();
    await db.end();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

function median(xs: number[]): number {
  return pct(xs, 0.5);
}

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
