// PostgreSQL backend CPU per claimed row of the scheduler's claim (the repository's CLAIM_DUE_SQL) and of the
// tick's count (COUNT_DUE_SQL), at each size of the connections table, the sizes alternated round by round:
// whether the claim's cost grows with the table. Used for the claim figures in docs/benchmarks.md.
//
//   npx tsx bench/micro-claim.ts
//
// Each size is seeded as bench/scale.ts seeds it (bench/scale-seed.ts: 10,000 tenants, half of the connections
// in one big tenant). A round makes the same 300 of the big tenant's connections due, claims them in three
// statements of 100 (each after a count, as a tick runs them), and puts them back a day ahead, not counted.
// Env: DATABASE_URL, MICRO_SIZES (1000,1000000; a size written `<n>:before` is seeded again with MICRO_BEFORE_SQL
// applied, and its claim compared with the size's own: `MICRO_SIZES=1000,1000:before` measures a schema change in one
// run), MICRO_ROUNDS (15, the first not counted), MICRO_CLAIM_SQL (another claim to compare, with the repository's
// parameters $1..$3), MICRO_SETUP_SQL (statements separated by `;;`, run after seeding), MICRO_BEFORE_SQL (likewise;
// by default the change trigger's comparison on every claim, as before migration LeaseUpdatesSkipChangeCompare).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { CLAIM_DUE_SQL, COUNT_DUE_SQL } from '../src/connections/store/renewal-lease.repository.js';
import { cpuMs, median } from './harness.js';
import { scratchDatabase, type ScratchDatabase } from './measure.js';
import { BIG_TENANT, seedConnections, seedTenants } from './scale-seed.js';

const SIZES = (process.env.MICRO_SIZES ?? '1000,1000000').split(',').map((entry) => {
  const [n, variant] = entry.split(':');
  return { n: Number(n), before: variant === 'before' };
});
// Before migration LeaseUpdatesSkipChangeCompare the statement trigger compared every UPDATE's rows: the mark that
// lets it skip the comparison, set for every session of the database, makes it compare again on every claim.
const BEFORE_SQL =
  process.env.MICRO_BEFORE_SQL ??
  `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET cws.connections_changed = %L', current_database(), 'on'); END $$`;
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 15);
const CLAIM_SQL = process.env.MICRO_CLAIM_SQL ?? CLAIM_DUE_SQL;
const TENANTS = 10_000;
const BATCH = 100;
const STATEMENTS = 3;

interface Size {
  n: number;
  label: string;
  scratch: ScratchDatabase;
  claimer: pg.Client;
  pid: number;
  ids: string[];
  claimUs: number[];
  countUs: number[];
}

async function prepare(n: number, before: boolean): Promise<Size> {
  const vaultKeys = `k1:${randomBytes(32).toString('base64')}`;
  const scratch = await scratchDatabase('cws_micro_claim');
  await seedTenants(scratch.db, vaultKeys, TENANTS);
  const accessExpiresAt = new Date(Date.now() + 3_600_000);
  await seedConnections(scratch.db, vaultKeys, { tenants: TENANTS, connections: n, accessToken: 'unused', accessExpiresAt });
  const setup = `${process.env.MICRO_SETUP_SQL ?? ''};;${before ? BEFORE_SQL : ''}`;
  for (const sql of setup.split(';;').filter((s) => s.trim() !== '')) await scratch.db.query(sql);
  await scratch.db.query('VACUUM ANALYZE');
  await scratch.db.query('CHECKPOINT');
  const due = await scratch.db.query<{ id: string }>(
    `SELECT id FROM connections WHERE tenant_id = $1 AND status = 'active' ORDER BY created_at LIMIT $2`,
    [BIG_TENANT, BATCH * STATEMENTS],
  );
  const claimer = new pg.Client({ connectionString: scratch.url, application_name: 'micro-claim' });
  await claimer.connect();
  const pid = (await claimer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  const label = `${n} connections${before ? ' (before)' : ''}`;
  console.log(`${label} seeded`);
  return { n, label, scratch, claimer, pid, ids: due.rows.map((r) => r.id), claimUs: [], countUs: [] };
}

/** The size's claimed rows made due a second ago (`now`) or put back a day ahead (`later`), their leases cleared. */
async function setDue(size: Size, when: 'now' | 'later'): Promise<void> {
  const at = when === 'now' ? `now() - interval '1 second'` : `now() + interval '1 day'`;
  await size.scratch.db.query(
    `UPDATE connections SET refresh_due_at = ${at}, lease_owner = NULL, lease_until = NULL WHERE id = ANY($1::uuid[])`,
    [size.ids],
  );
}

/** One round at one size: the rows made due, counted and claimed (measured), then put back (not measured). */
async function round(size: Size, counted: boolean): Promise<void> {
  const { claimer, pid, ids } = size;
  await setDue(size, 'now');
  let claimed = 0;
  let countMs = 0;
  const before = cpuMs(pid);
  for (let k = 0; k < STATEMENTS; k++) {
    const c0 = cpuMs(pid);
    await claimer.query({ name: 'count', text: COUNT_DUE_SQL, values: [64] });
    countMs += cpuMs(pid) - c0;
    const res = await claimer.query({ name: 'claim', text: CLAIM_SQL, values: ['micro', 60_000, BATCH] });
    claimed += res.rowCount ?? 0;
  }
  const claimMs = cpuMs(pid) - before - countMs;
  if (claimed !== ids.length) throw new Error(`${size.n}: claimed ${claimed} of ${ids.length}`);
  if (counted) {
    size.claimUs.push((claimMs * 1000) / claimed);
    size.countUs.push((countMs * 1000) / STATEMENTS);
  }
  await setDue(size, 'later');
}

/** Buffers one claim of a batch touches, by plan node (EXPLAIN ANALYZE, rolled back). */
async function planBuffers(size: Size): Promise<string> {
  const { scratch } = size;
  await setDue(size, 'now');
  await scratch.db.query('BEGIN');
  try {
    const plan = await scratch.db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${CLAIM_SQL}`, [
      'micro',
      60_000,
      BATCH,
    ]);
    return plan.rows
      .map((r) => r['QUERY PLAN'])
      .filter((line) => /Scan|Update|Buffers: shared/.test(line))
      .join('\n');
  } finally {
    await scratch.db.query('ROLLBACK');
    await setDue(size, 'later');
  }
}

async function main(): Promise<void> {
  const sizes: Size[] = [];
  try {
    for (const { n, before } of SIZES) sizes.push(await prepare(n, before));
    for (let r = 0; r < ROUNDS; r++) {
      for (const size of r % 2 === 0 ? sizes : [...sizes].reverse()) await round(size, r > 0);
    }
    console.log(`\n${ROUNDS - 1} rounds counted, ${BATCH * STATEMENTS} rows claimed a round in ${STATEMENTS} statements\n`);
    for (const size of sizes) {
      console.log(`${size.label}: the claim ${median(size.claimUs).toFixed(1)} µs of backend CPU per claimed row`);
      console.log(`  rounds: ${size.claimUs.map((v) => v.toFixed(1)).join(' ')}`);
      console.log(`  the count before each claim: ${median(size.countUs).toFixed(1)} µs`);
      console.log(`  one claim of ${BATCH}:\n${(await planBuffers(size)).replace(/^/gm, '    ')}`);
    }
    const plain = sizes.filter((size) => !size.label.endsWith('(before)'));
    const first = median(plain[0].claimUs);
    for (const size of plain.slice(1)) {
      console.log(`RESULT claim CPU per row, ${size.n} / ${plain[0].n}: ${(median(size.claimUs) / first).toFixed(2)}`);
    }
    for (const size of plain) {
      const before = sizes.find((b) => b.n === size.n && b !== size && b.label.endsWith('(before)'));
      if (before)
        console.log(
          `RESULT claim CPU per row at ${size.n}, now / before: ${(median(size.claimUs) / median(before.claimUs)).toFixed(2)} ` +
            `(${median(size.claimUs).toFixed(1)} / ${median(before.claimUs).toFixed(1)} µs; a claim of ${BATCH}: ` +
            `${(((median(before.claimUs) - median(size.claimUs)) * BATCH) / 1000).toFixed(3)} ms less)`,
        );
    }
  } finally {
    for (const size of sizes) {
      await size.claimer.end().catch(() => undefined);
      await size.scratch.drop();
    }
  }
}

await main();
