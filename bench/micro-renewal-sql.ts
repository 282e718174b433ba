// PostgreSQL backend CPU per renewal of renewal's statements alone (claim, save, history line), without the
// app or the sandbox: one connection per kind of statement, so that each backend's CPU from /proc is that
// statement's. Used for the statement figures in docs/renewal.md.
//
//   npx tsx bench/micro-renewal-sql.ts
//
// Env: DATABASE_URL, MICRO_CONNECTIONS (10000), MICRO_LOOPS (3 measured passes over all of them, after one
// not counted), MICRO_GROUP (10 pairs per save, about the commit lane's group under the benchmark),
// MICRO_VARIANT (`current`: the save as it was before the history line joined it, plus the separate
// history upsert per claimed batch; any other name with MICRO_SAVE_SQL: that save, given the durations as $9),
// MICRO_HEALTH=off (no separate history upsert), MICRO_SETUP_SQL (statements separated by `;;`, run after
// seeding: drop an index, add a column...).
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { runMigrations } from '../src/database/migrate.js';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.env.MICRO_CONNECTIONS ?? 10_000);
const LOOPS = Number(process.env.MICRO_LOOPS ?? 3);
const VARIANT = process.env.MICRO_VARIANT ?? 'current';
const GROUP = Number(process.env.MICRO_GROUP ?? 10);
const TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS;
}

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
    const health = await client(url, '', 'micro-health');
    const sums = { claim: 0, save: 0, health: 0 };
    const total = { n: 0 };
    const claimSql = `UPDATE connections c SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
         FROM (SELECT id, tenant_id FROM connections
                WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now())
                ORDER BY refresh_due_at LIMIT $3 FOR UPDATE SKIP LOCKED) due
         JOIN tenants t ON t.id = due.tenant_id
        WHERE c.id = due.id AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING c.id, c.tenant_id, c.status, c.version, c.access_token_enc, c.refresh_token_enc, c.refresh_failures,
        (extract(epoch FROM c.access_token_expires_at) * 1000)::float8 AS access_token_expires_ms, t.environment`;
    const saveSql =
      process.env.MICRO_SAVE_SQL ??
      `UPDATE connections c SET access_token_enc = v.at, refresh_token_enc = v.rt, access_token_expires_at = to_timestamp(v.exp_ms / 1000),
        refresh_due_at = to_timestamp(v.due_ms / 1000), last_refreshed_at = to_timestamp(v.now_ms / 1000), refresh_failures = 0,
        version = c.version + 1, lease_owner = NULL, lease_until = NULL, updated_at = to_timestamp(v.now_ms / 1000)
   FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::float8[], $7::float8[], $8::float8[]) AS v(id, version, at, rt, exp_ms, due_ms, now_ms)
  WHERE c.id = v.id AND c.version = v.version AND c.lease_owner = $1
  RETURNING c.id`;
    const healthSql = `INSERT INTO connection_health AS h (connection_id, last_error_code, last_error_at, renewal_at, renewal_outcome, renewal_error, renewal_ms)
       SELECT v.id, v.code, v.error_at, ARRAY[v.at], ARRAY[v.outcome], ARRAY[v.error], ARRAY[v.ms]
         FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[], $7::integer[])
              AS v(id, code, error_at, at, outcome, error, ms)
        WHERE EXISTS (SELECT 1 FROM connections c WHERE c.id = v.id)
       ON CONFLICT (connection_id) DO UPDATE
          SET last_error_code = EXCLUDED.last_error_code, last_error_at = EXCLUDED.last_error_at,
              renewal_at = (EXCLUDED.renewal_at || h.renewal_at)[1:20],
              renewal_outcome = (EXCLUDED.renewal_outcome || h.renewal_outcome)[1:20],
              renewal_error = (EXCLUDED.renewal_error || h.renewal_error)[1:20],
              renewal_ms = (EXCLUDED.renewal_ms || h.renewal_ms)[1:20]`;
    const withHealth = process.env.MICRO_HEALTH !== 'off';
    for (let loop = 0; loop < LOOPS + 1; loop++) {
      await setup.c.query(`VACUUM connections`);
      await setup.c.query(`VACUUM connection_health`);
      await setup.c.query(`UPDATE connections SET refresh_due_at = now()`);
      const b = { claim: cpuMs(claimer.pid), save: cpuMs(saver.pid), health: cpuMs(health.pid) };
      let done = 0;
      for (;;) {
        const claimed = await claimer.c.query({ name: 'claim', text: claimSql, values: ['me', 60_000, 100] });
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
          ];
          if (VARIANT !== 'current') params.push(grp.map(() => 40));
          const saved = await saver.c.query({ name: 'save', text: saveSql, values: params });
          if (saved.rows.length !== grp.length) throw new Error(`saved ${saved.rows.length} of ${grp.length}`);
        }
        if (withHealth && VARIANT === 'current') {
          await health.c.query('BEGIN');
          await health.c.query('SET LOCAL synchronous_commit = off');
          const at = new Date();
          await health.c.query(healthSql, [
            items.map((i) => i.id),
            items.map(() => null),
            items.map(() => null),
            items.map(() => at),
            items.map(() => 'renewed'),
            items.map(() => null),
            items.map(() => 40),
          ]);
          await health.c.query('COMMIT');
        }
        done += items.length;
      }
      const a = { claim: cpuMs(claimer.pid), save: cpuMs(saver.pid), health: cpuMs(health.pid) };
      if (loop > 0) {
        sums.claim += a.claim - b.claim;
        sums.save += a.save - b.save;
        sums.health += a.health - b.health;
        total.n += done;
      }
    }
    const per = (ms: number) => ((ms * 1000) / total.n).toFixed(1);
    const stats = await setup.c.query(
      `SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname IN ('connections','connection_health')`,
    );
    console.log(
      `${VARIANT} group ${GROUP}: µs per renewal claim ${per(sums.claim)} save ${per(sums.save)} health ${per(sums.health)} total ${per(sums.claim + sums.save + sums.health)} (${total.n} renewals) ${JSON.stringify(stats.rows)}`,
    );
    for (const x of [claimer, saver, health, setup]) await x.c.end();
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
