// PostgreSQL backend CPU per renewal of renewal's statements alone (claim, save, history line), without the
// app or the sandbox: one connection per kind of statement, so that each backend's CPU from /proc is that
// statement's. Used for the statement figures in docs/benchmarks.md ("Renewal").
//
//   npx tsx bench/micro-renewal-sql.ts
//
// The statements are the repository's own (the renewal repositories' CLAIM_DUE_SQL and SAVE_RENEWED_SQL, which
// writes each pair's history line too), so the figures follow the code.
// Env: DATABASE_URL, MICRO_CONNECTIONS (10000), MICRO_LOOPS (3 measured passes over all of them, after one
// not counted), MICRO_GROUP (10 pairs per save, about the commit lane's group under the benchmark),
// MICRO_SAVE_SQL (another save to try, with the repository's parameters $1..$9), MICRO_SETUP_SQL (statements
// separated by `;;`, run after seeding: drop an index, add a column...).
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { CLAIM_DUE_SQL } from '../src/connections/store/renewal-lease.repository.js';
import { SAVE_RENEWED_SQL } from '../src/connections/store/renewal-save.repository.js';
import { runMigrations } from '../src/database/migrate.js';
import { cpuMs } from './harness.js';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.env.MICRO_CONNECTIONS ?? 10_000);
const LOOPS = Number(process.env.MICRO_LOOPS ?? 3);
const GROUP = Number(process.env.MICRO_GROUP ?? 10);

const tok = () =>
  `v1.k1.${randomBytes(12).toString('base64url')}.${randomBytes(64).toString('base64url')}.${randomBytes(16).toString('base64url')}`;

async function client(url: string, options = '', name = 'micro'): Promise<{ c: pg.Client; pid: number }> {
  const c = new pg.Client({ connectionString: url, options, application_name: name });
  await c.connect();
  const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  return { c, pid };
}

async function main(): Promise<void> {
  const dbName = `r3_micro_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const u = new URL(SERVER_URL);
  u.pathname = `/${dbName}`;
  const url = u.toString();
  try {
    await runMigrations(url);
    const setup = await client(url);
    await setup.c
      .query(`INSERT INTO tenants (id, name, environment, events_secret_enc) VALUES ('bench', 'Bench', 'sandbox', 'x')`)
      .catch(async () => {
        const cols = await setup.c.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'tenants'`);
        throw new Error(`tenants columns: ${cols.rows.map((r) => r.column_name).join(',')}`);
      });
    for (let i = 0; i < N; i += 500) {
      const vals: unknown[] = [];
      const tuples: string[] = [];
      for (let k = i; k < Math.min(N, i + 500); k++) {
        const p = vals.length;
        tuples.push(
          `($${p + 1}, 'bench', 'user', $${p + 2}, 'alice', 'active', '[]'::jsonb, $${p + 3}, $${p + 4}, now() + interval '6 hours', now() + interval '1 day', now(), now())`,
        );
        vals.push(randomUUID(), `u-${k}`, tok(), tok());
      }
      await setup.c.query(
        `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, status, scopes, access_token_enc, refresh_token_enc, access_token_expires_at, refresh_due_at, created_at, updated_at) VALUES ${tuples.join(',')}`,
        vals,
      );
    }
    if (process.env.MICRO_SETUP_SQL) for (const s of process.env.MICRO_SETUP_SQL.split(';;')) await setup.c.query(s);
    const claimer = await client(url, '-c plan_cache_mode=force_generic_plan', 'micro-claim');
    const saver = await client(url, '-c cws.defer_change_notify=on -c plan_cache_mode=force_generic_plan', 'micro-save');
    const sums = { claim: 0, save: 0 };
    const total = { n: 0 };
    const saveSql = process.env.MICRO_SAVE_SQL ?? SAVE_RENEWED_SQL;
    for (let loop = 0; loop < LOOPS + 1; loop++) {
      await setup.c.query(`VACUUM connections`);
      await setup.c.query(`VACUUM connection_health`);
      await setup.c.query(`UPDATE connections SET refresh_due_at = now()`);
      const b = { claim: cpuMs(claimer.pid), save: cpuMs(saver.pid) };
      let done = 0;
      for (;;) {
        const claimed = await claimer.c.query({ name: 'claim', text: CLAIM_DUE_SQL, values: ['me', 60_000, 100] });
        if (claimed.rows.length === 0) break;
        const now = Date.now();
        const items = claimed.rows.map((r) => ({ id: r.id as string, version: Number(r.version) }));
        for (let g = 0; g < items.length; g += GROUP) {
          const grp = items.slice(g, g + GROUP).sort((x, y) => (x.id < y.id ? -1 : 1));
          const params = [
            'me',
            grp.map((i) => i.id),
            grp.map((i) => i.version),
            grp.map(() => tok()),
            grp.map(() => tok()),
            grp.map(() => now + 21_600_000),
            grp.map(() => now + 86_400_000 + Math.random() * 1e6),
            grp.map(() => now),
            grp.map(() => 40),
          ];
          const saved = await saver.c.query({ name: 'save', text: saveSql, values: params });
          if (saved.rows.length !== grp.length) throw new Error(`saved ${saved.rows.length} of ${grp.length}`);
        }
        done += items.length;
      }
      const a = { claim: cpuMs(claimer.pid), save: cpuMs(saver.pid) };
      if (loop > 0) {
        sums.claim += a.claim - b.claim;
        sums.save += a.save - b.save;
        total.n += done;
      }
    }
    const per = (ms: number) => ((ms * 1000) / total.n).toFixed(1);
    const stats = await setup.c.query(
      `SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname IN ('connections','connection_health')`,
    );
    console.log(
      `${process.env.MICRO_SAVE_SQL ? 'MICRO_SAVE_SQL' : 'repository'} save, group ${GROUP}: µs per renewal claim ${per(sums.claim)} save (with its history line) ${per(sums.save)} total ${per(sums.claim + sums.save)} (${total.n} renewals) ${JSON.stringify(stats.rows)}`,
    );
    for (const x of [claimer, saver, setup]) await x.c.end();
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
