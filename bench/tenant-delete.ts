// Other tenants while a big tenant is deleted (docs/data-retention.md, "Tenant deletion"): the p99 of another
// tenant's facade calls and inbound deliveries, at a fixed rate, before `DELETE /v1/tenants/{big}` and while the
// service removes the big tenant's rows in the background, against the compiled service on a seeded database.
//
//   npx tsx bench/tenant-delete.ts      (DATABASE_URL: a PostgreSQL server; a scratch database is made and dropped)
//
// Env: BENCH_EVENTS (events of the big tenant, 1000000; as many again go to the other tenants), BENCH_TENANTS (20),
// BENCH_CONNECTIONS (2000, half of them the big tenant's), BENCH_RATE (requests/s of each load, 100),
// BENCH_SECONDS (5: one round), BENCH_ROUNDS (8: rounds before the deletion, and after the removal), BENCH_MAX_MINUTES (20: how long the
// removal may take), BENCH_SKIP_BUILD=1. Not part of `npm test`.
//
// A round measures both loads at once; a round after the deletion counts as "during the removal" when rows of
// events were deleted in it (pg_stat_user_tables); as many rounds as before run after the removal. The goal: the
// other tenant's p99 over every answer of the rounds during the removal within 2x of its p99 over every answer of
// the rounds without it (before and after), for both loads; the bench prints the ratios and whether the goal was
// met. It also prints the single rounds' figures (the worst round during against the median round before, the
// measure of earlier runs, and the rounds without the removal against each other: the machine's own noise).
import { randomBytes } from 'node:crypto';
import { availableParallelism, cpus, loadavg } from 'node:os';
import autocannon from 'autocannon';
import type pg from 'pg';
import { buildApp, type SpawnedApp } from '../test/support/spawn-app.js';
import { DELIVERY_BODY, finish, median } from './harness.js';
import { addReceiver, type BenchSandbox, p99, scratchDatabase, startBenchApp, startSandbox, tenantKey } from './measure.js';
import { BIG_TENANT, seedAll, tenantId } from './scale-seed.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 2000);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const MAX_MINUTES = Number(process.env.BENCH_MAX_MINUTES ?? 20);
/** The other tenant, and its first user (scale-seed's tenantOf: the first connection past the big half). */
const OTHER = tenantId(1);
const OTHER_USER = `u-${Math.floor(CONNECTIONS / 2)}`;

interface Round {
  facadeP99: number;
  inboundP99: number;
  deleted: number;
  /** Every answer's latency (ms), for the p99 over all the rounds of a phase. */
  facadeMs: number[];
  inboundMs: number[];
}

async function eventRowsDeleted(db: pg.Client): Promise<number> {
  const r = await db.query<{ n: string | null }>(
    `SELECT sum(n_tup_del)::text AS n FROM pg_stat_user_tables WHERE relname ~ '^(events|event_attempts)_'`,
  );
  return Number(r.rows[0].n ?? 0);
}

async function round(db: pg.Client, facade: { url: string; headers: Record<string, string> }, inbound: typeof facade): Promise<Round> {
  const before = await eventRowsDeleted(db);
  const facadeMs: number[] = [];
  const inboundMs: number[] = [];
  const load = (target: typeof facade, into: number[], extra: { method?: string; body?: string }) =>
    autocannon({ url: target.url, headers: target.headers, connections: 4, overallRate: RATE, duration: SECONDS, ...extra }).on(
      'response',
      (_client, _status, _bytes, ms) => into.push(ms),
    );
  const [f, i] = await Promise.all([load(facade, facadeMs, {}), load(inbound, inboundMs, { method: 'POST', body: DELIVERY_BODY })]);
  if (f.non2xx + f.errors + i.non2xx + i.errors)
    throw new Error(`failed requests: facade ${f.non2xx + f.errors}, inbound ${i.non2xx + i.errors}`);
  // The statistics collector flushes at transaction end and at most once a second.
  await new Promise((r) => setTimeout(r, 1100));
  return { facadeP99: f.latency.p99, inboundP99: i.latency.p99, deleted: (await eventRowsDeleted(db)) - before, facadeMs, inboundMs };
}

/** What the retention runs' log lines (`retention run`, with `pacing`) say of the removal's pacing. */
function pacingOf(output: string[]): {
  runs: number;
  batches: number;
  restedMs: number;
  slowProbes: number;
  rows: number;
  usualProbeMs: number;
} {
  const sum = { runs: 0, batches: 0, restedMs: 0, slowProbes: 0, rows: 0, usualProbeMs: 0 };
  for (const line of output.join('').split('\n')) {
    if (!line.includes('"retention run"')) continue;
    const p = (
      JSON.parse(line) as { pacing?: { batches: number; restedMs: number; slowProbes: number; rows: number; usualProbeMs: number } }
    ).pacing;
    if (!p) continue;
    sum.runs++;
    sum.batches += p.batches;
    sum.restedMs += p.restedMs;
    sum.slowProbes += p.slowProbes;
    sum.rows = p.rows;
    sum.usualProbeMs = p.usualProbeMs;
  }
  return sum;
}

async function main(): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) buildApp();
  console.log(
    `bench/tenant-delete.ts: ${EVENTS} events of ${BIG_TENANT} (and ${EVENTS} of ${TENANTS - 1} others), ${CONNECTIONS} connections; ` +
      `${RATE} requests/s each of facade and inbound to ${OTHER}; ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}, node ${process.version}, ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  const sandbox: BenchSandbox = await startSandbox();
  const scratch = await scratchDatabase('cws_tenant_delete');
  const { db } = scratch;
  let app: SpawnedApp | null = null;
  try {
    const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
    const shared = await sandbox.tokens('alice');
    const seededIn = await seedAll(db, vaultKeys, shared, {
      tenants: TENANTS,
      connections: CONNECTIONS,
      events: 2 * EVENTS,
      payload: DELIVERY_BODY,
    });
    const big = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE tenant_id = $1`, [BIG_TENANT]);
    console.log(`seeded in ${seededIn.toFixed(1)} s: ${big.rows[0].n} events of ${BIG_TENANT}`);

    // Info: the retention runs' log lines say how the removal was paced.
    const started = await startBenchApp(scratch.url, sandbox, vaultKeys, { LOG_LEVEL: 'info' });
    app = started.app;
    const key = await tenantKey(app.url, started.operatorKey, OTHER);
    const receiver = await addReceiver(db, vaultKeys, OTHER);
    const facade = {
      url: `${app.url}/v1/tenants/${OTHER}/workflows`,
      headers: { authorization: `Bearer ${key}`, 'x-user-id': OTHER_USER, accept: 'application/json' },
    };
    const inbound = {
      url: `${app.url}/inbound/${OTHER}/${receiver.id}`,
      headers: { authorization: receiver.authorization, 'content-type': 'application/json' },
    };
    await round(db, facade, inbound); // warm-up

    const before: Round[] = [];
    for (let k = 0; k < ROUNDS; k++) before.push(await round(db, facade, inbound));
    const print = (label: string, r: Round) =>
      console.log(`  ${label}: facade p99 ${r.facadeP99} ms, inbound p99 ${r.inboundP99} ms, event rows deleted ${r.deleted}`);
    before.forEach((r, k) => print(`before ${k + 1}`, r));

    const res = await fetch(`${app.url}/v1/tenants/${BIG_TENANT}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${started.operatorKey}` },
    });
    if (res.status !== 204) throw new Error(`DELETE answered ${res.status}`);
    const t = performance.now();
    const during: Round[] = [];
    let removed = false;
    while (!removed) {
      if (performance.now() - t > MAX_MINUTES * 60_000) throw new Error(`the tenant was not removed in ${MAX_MINUTES} minutes`);
      const r = await round(db, facade, inbound);
      removed = (await db.query(`SELECT 1 FROM tenants WHERE id = $1`, [BIG_TENANT])).rowCount === 0;
      if (r.deleted > 0) {
        during.push(r);
        print(`during ${during.length}`, r);
      }
    }
    const removal = (performance.now() - t) / 1000;
    const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE tenant_id = $1`, [BIG_TENANT]);
    console.log(`${BIG_TENANT} removed within ${removal.toFixed(0)} s of the DELETE (${left.rows[0].n} of its events left)`);
    const paced = pacingOf(app.output);
    console.log(
      `the removal's pacing over ${paced.runs} retention runs: ${paced.batches} batches, ${(paced.restedMs / 1000).toFixed(1)} s rested ` +
        `(${paced.slowProbes} rests for a slow probe), last batch ${paced.rows} rows, usual probe ${paced.usualProbeMs.toFixed(2)} ms`,
    );

    if (during.length === 0) throw new Error('no round saw event rows removed (too few to span a round: raise BENCH_EVENTS)');
    // As many rounds after the removal as before it: the baseline is both, so a machine whose other load drifts
    // during the bench does not pass for the removal's doing (or hide it).
    const after: Round[] = [];
    for (let k = 0; k < ROUNDS; k++) after.push(await round(db, facade, inbound));
    after.forEach((r, k) => print(`after ${k + 1}`, r));
    const quiet = [...before, ...after];
    // The p99 over every answer of a phase: what the other tenant saw without the removal (before and after it) and
    // during it. The worst single round is printed too, but it is the worst of however many rounds the removal
    // lasted (a slower, gentler removal has more of them), against the median round before: on a machine with other
    // work, single rounds without the removal already vary by more than 2x (the noise column).
    console.log(
      `\n| ${OTHER}'s figure | p99 over every answer: before, after | without the removal | during it | during / without | goal | ` +
        `rounds without: median, worst / median (noise) | rounds during: median, worst (of ${during.length}) | worst round / median before |`,
    );
    console.log('|---|---:|---:|---:|---:|---|---:|---:|---:|');
    let met = true;
    for (const [name, pick, all] of [
      ['facade p99 (ms)', (r: Round) => r.facadeP99, (r: Round) => r.facadeMs],
      ['inbound p99 (ms)', (r: Round) => r.inboundP99, (r: Round) => r.inboundMs],
    ] as const) {
      const pooledQuiet = p99(quiet.flatMap(all));
      const pooledDuring = p99(during.flatMap(all));
      const ratio = pooledDuring / pooledQuiet;
      met &&= ratio <= 2;
      const quietMedian = median(quiet.map(pick));
      const worst = Math.max(...during.map(pick));
      console.log(
        `| ${name} | ${p99(before.flatMap(all)).toFixed(1)}, ${p99(after.flatMap(all)).toFixed(1)} | ${pooledQuiet.toFixed(1)} | ${pooledDuring.toFixed(1)} | ` +
          `${ratio.toFixed(2)} | <= 2: ${ratio <= 2 ? 'met' : 'MISSED'} | ${quietMedian}, ${(Math.max(...quiet.map(pick)) / quietMedian).toFixed(2)} | ` +
          `${median(during.map(pick))}, ${worst} | ${(worst / median(before.map(pick))).toFixed(2)} |`,
      );
    }
    console.log(
      `\ngoal (the other tenant's p99 during the removal within 2x of its p99 without it, both figures): ${met ? 'met' : 'MISSED'}`,
    );
    console.log(
      `\nload average at the end: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    await app?.stop('SIGTERM');
    await scratch.drop();
    sandbox.proc.kill('SIGTERM');
  }
}

finish(main());
