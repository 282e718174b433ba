// bench/scale.ts's body (see there for the command and the environment).
import { randomBytes } from 'node:crypto';
import { availableParallelism, cpus, loadavg } from 'node:os';
import autocannon from 'autocannon';
import pg from 'pg';
import type { SpawnedApp } from '../test/support/spawn-app.js';
import { DELIVERY_BODY, finish, median } from './harness.js';
import {
  addReceiver,
  type BenchSandbox,
  cpuPerOp,
  inParallel,
  p99,
  rssMiB,
  scratchDatabase,
  startBenchApp,
  startSandbox,
  tenantKey,
  timed,
} from './measure.js';
import { BIG_TENANT, makeDue, REAUTH_EVERY, seedAll } from './scale-seed.js';

const SIZES = (process.env.SCALE_SIZES ?? '1000,100000,1000000').split(',').map(Number);
const TENANTS = Number(process.env.SCALE_TENANTS ?? 10_000);
const DUE = Number(process.env.SCALE_DUE ?? 400);
const BACKLOG = Number(process.env.SCALE_BACKLOG ?? 50_000);
const SECONDS = Number(process.env.SCALE_SECONDS ?? 3);
/** The service's V8 flags: the heap bounds the deploy examples set (docs/operations.md, "Memory"); empty for none. */
const APP_NODE_OPTIONS = process.env.SCALE_NODE_OPTIONS ?? '--max-old-space-size=256 --max-semi-space-size=16';
/** Reads of each page per round, and rounds (the figure: the p99 of all of them). */
const PAGE_SAMPLES = 100;
const PAGE_ROUNDS = Number(process.env.SCALE_PAGE_ROUNDS ?? 5);
/** Rows a measured page holds at every size (a shorter page, the last of a small tenant, is not compared). */
const PAGE_LIMIT = 100;
/** Rounds of the facade's and inbound's CPU figures (the figure: their median). */
const CPU_ROUNDS = 3;
/** Rounds of the cold facade's figure (each a call of every cold user; the figure: their median). */
const COLD_ROUNDS = 5;
/** Answers of each console page (the figure: their median). */
const CONSOLE_SAMPLES = 21;
/** A connection is renewed every 0.8 of its 6-hour token's life: an hour holds this share of them. */
const RENEWALS_PER_HOUR_SHARE = 3600 / (0.8 * 21_600);
/** Distinct users called once each for the cold-cache facade figure. */
const COLD_USERS = 1000;
/** Calls before a measured phase of the facade or of /inbound. */
const WARMUP_CALLS = 20_000;

/** One figure at one size: a value and how it compares (lower is better unless `higherIsBetter`). */
interface Figure {
  name: string;
  unit: string;
  value: number;
  goal: string;
  /** true: the goal is on the ratio to the first size (else on the absolute difference, for RSS). */
  check: (ratio: number, value: number, first: number) => boolean;
}

const within = (max: number) => (r: number) => r <= max;
const atLeast = (min: number) => (r: number) => r >= min;

/**
 * Waits until the connections made due (`ids`, at `since`, the database's clock) are all renewed; answers the
 * seconds from `since` to the last renewal's commit (last_refreshed_at: the app's clock, same machine).
 */
async function renewed(db: pg.Client, since: Date, ids: string[], timeoutS: number): Promise<number> {
  const t0 = Date.now();
  // A poll reads every id: a large set is polled less often (its cost on the service's cores stays small).
  const every = Math.min(2000, Math.max(250, ids.length / 100));
  for (;;) {
    await new Promise((r) => setTimeout(r, every));
    const r = await db.query<{ n: number; last: Date | null }>(
      `SELECT count(*)::int AS n, max(last_refreshed_at) AS last FROM connections WHERE id = ANY($1::uuid[]) AND last_refreshed_at >= $2`,
      [ids, since],
    );
    if (r.rows[0].n >= ids.length && r.rows[0].last) return (r.rows[0].last.getTime() - since.getTime()) / 1000;
    if (Date.now() - t0 > timeoutS * 1000) throw new Error(`only ${r.rows[0].n} of ${ids.length} renewed in ${timeoutS} s`);
  }
}

async function runSize(size: number, sandbox: BenchSandbox): Promise<Figure[]> {
  const figures: Figure[] = [];
  const add = (name: string, unit: string, value: number, goal: string, check: Figure['check']) => {
    figures.push({ name, unit, value, goal, check });
    console.log(`  ${name}: ${value.toFixed(unit === 'x' ? 2 : 1)} ${unit}`);
  };
  const scratch = await scratchDatabase(`cws_scale_${size}`);
  const { db, name: dbName } = scratch;
  let app: SpawnedApp | null = null;
  try {
    const vaultKeys = `scale:${randomBytes(32).toString('base64')}`;
    const sandboxCall = (userId: string) => sandbox.tokens(userId);
    const shared = await sandboxCall('alice');
    const events = Number(process.env.SCALE_EVENTS ?? size);
    const seededIn = await seedAll(db, vaultKeys, shared, { tenants: TENANTS, connections: size, events, payload: DELIVERY_BODY });
    console.log(`\n${size} connections, ${TENANTS} tenants, ${events} events: seeded in ${seededIn.toFixed(1)} s`);

    // Start-up to ready, and memory after start.
    const t = performance.now();
    const started = await startBenchApp(scratch.url, sandbox, vaultKeys, { REFRESH_INTERVAL_MS: '100', NODE_OPTIONS: APP_NODE_OPTIONS });
    app = started.app;
    const operatorKey = started.operatorKey;
    add('start-up to ready', 'ms', performance.now() - t, '<= 1.5x', within(1.5));
    const rssStart = rssMiB(app.pid);
    add('RSS after start', 'MiB', rssStart, '<= +64 MiB', (_r, v, first) => v - first <= 64);
    const appUrl = app.url;
    const pid = app.pid;
    const op = { authorization: `Bearer ${operatorKey}` };

    const key = await tenantKey(appUrl, operatorKey, BIG_TENANT);
    const tk = { authorization: `Bearer ${key}` };
    const base = `${appUrl}/v1/tenants/${BIG_TENANT}`;

    // Facade: warm (one user, again and again) and cold (a thousand users never called before, each once).
    const warmHeaders = { ...tk, 'x-user-id': 'u-0', accept: 'application/json' };
    // Warm-up by count, not time: the JIT's tiers are reached by calls, and a loaded machine serves few a second.
    await autocannon({ url: `${base}/workflows`, headers: warmHeaders, connections: 20, amount: WARMUP_CALLS, timeout: 60 });
    const warmRounds: Array<{ app: number; db: number; rate: number }> = [];
    for (let round = 0; round < CPU_ROUNDS; round++) {
      let rate = 0;
      const cpu = await cpuPerOp(db, dbName, pid, async () => {
        const r = await autocannon({ url: `${base}/workflows`, headers: warmHeaders, connections: 20, duration: SECONDS });
        if (r.non2xx + r.errors) throw new Error(`facade: ${r.non2xx + r.errors} failed`);
        rate = r.requests.average;
        return r.requests.total;
      });
      warmRounds.push({ ...cpu, rate });
    }
    const warm = median(warmRounds.map((r) => r.app + r.db));
    const warmRate = median(warmRounds.map((r) => r.rate));
    add('facade CPU per request, warm cache (app + database)', 'µs', warm, '<= 1.1x', within(1.1));
    console.log(
      `    rounds (app + database µs): ${warmRounds.map((r) => `${r.app.toFixed(0)} + ${r.db.toFixed(0)}`).join(', ')}; ${warmRate.toFixed(0)} requests/s`,
    );
    const bigCount = Math.floor(size / 2);
    const coldUsers = Math.min(COLD_USERS, Math.floor(bigCount / 2));
    // Users spread over the big tenant's whole range (its rows everywhere in the table), none reauth_required.
    const coldNames = Array.from({ length: coldUsers }, (_, i) => {
      const n = Math.floor((i * bigCount) / coldUsers);
      return `u-${n % REAUTH_EVERY === REAUTH_EVERY - 1 ? n - 1 : n}`;
    });
    const coldRounds: Array<{ app: number; db: number }> = [];
    // Passes first, not counted, of COLD_USERS calls in all at every size (four of 250 users at 1k, one of 1,000
    // above): they open the pool's backends the cold path needs (a new backend's first statements load
    // PostgreSQL's catalog caches, milliseconds each) and bring the path's code to the same tier everywhere.
    const unmeasured = Math.ceil(COLD_USERS / coldUsers);
    for (let round = -unmeasured; round < COLD_ROUNDS; round++) {
      if (round > -unmeasured) {
        // Cold again: the change notifications a write to their rows would send (src/changes), sent without the
        // write, drop them from the service's caches and leave the rows as they were (a write would leave dead
        // versions that the next round's lookups step over).
        await db.query(
          `SELECT pg_notify('cws_changes', 'connections:' || $1 || ':' || string_agg(id::text, ',')) FROM (
             SELECT id, (row_number() OVER ()) / 100 AS chunk FROM connections
              WHERE tenant_id = $1 AND kind = 'user' AND user_id = ANY($2::text[])) ids GROUP BY chunk`,
          [BIG_TENANT, coldNames],
        );
        await new Promise((r) => setTimeout(r, 1000));
      }
      const measured = await cpuPerOp(db, dbName, pid, async () => {
        await inParallel(coldUsers, 10, async (i) => {
          const res = await fetch(`${base}/workflows`, { headers: { ...tk, 'x-user-id': coldNames[i], accept: 'application/json' } });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`facade (cold, ${coldNames[i]}) answered ${res.status}`);
        });
        return coldUsers;
      });
      if (round >= 0) coldRounds.push(measured);
    }
    add('facade CPU per request, cold cache (app + database)', 'µs', median(coldRounds.map((r) => r.app + r.db)), '<= 1.1x', within(1.1));
    console.log(
      `    rounds (app + database µs): ${coldRounds.map((r) => `${r.app.toFixed(0)} + ${r.db.toFixed(0)}`).join(', ')}; ${coldUsers} users`,
    );

    // Connections pages: first and deep (the 500th, or the deepest full page there is), for each filter. Every
    // measured page holds PAGE_LIMIT rows at every size, and the pages are read in turn, each PAGE_SAMPLES times a
    // round, so that a moment of the machine's own weather falls on all of them alike: the figure is the p99 of
    // all the rounds' reads together (the 5th slowest of 500), steadier than any one round's second slowest.
    const filters: Array<[string, string]> = [
      ['no filter', ''],
      ['userId', `&userId=u-${Math.floor(bigCount / 2)}`],
      ['kind=user', '&kind=user'],
      ['status=reauth_required', '&status=reauth_required'],
      ['environment=sandbox', '&environment=sandbox'],
    ];
    const pages: Array<{ name: string; url: string }> = [];
    for (const [label, q] of filters) {
      const first = `${base}/connections?limit=${PAGE_LIMIT}${q}`;
      pages.push({ name: `connections page 1 (${label}) p99`, url: first });
      if (label === 'userId') continue; // one row: no deep page
      let deep: { url: string; depth: number } | null = null;
      let url = first;
      // Follow `next` to the 500th page, keeping the deepest page that is full.
      for (let depth = 1; depth <= 500; depth++) {
        const page = JSON.parse((await timed(url, tk)).body) as { connections: unknown[]; next: string | null };
        if (page.connections.length < PAGE_LIMIT) break;
        if (depth > 1) deep = { url, depth };
        if (!page.next) break;
        url = `${first}&after=${encodeURIComponent(page.next)}`;
      }
      if (deep) {
        console.log(`    deep page (${label}): page ${deep.depth}`);
        pages.push({ name: `connections deep page (${label}) p99`, url: deep.url });
      }
    }
    const pageRounds = pages.map(() => [] as number[]);
    const pageReads = pages.map(() => [] as number[]);
    // A first round, not counted, brings every page's code and rows in.
    for (const page of pages) for (let k = 0; k < PAGE_SAMPLES / 4; k++) await timed(page.url, tk);
    for (let round = 0; round < PAGE_ROUNDS; round++) {
      const ms = pages.map(() => [] as number[]);
      for (let k = 0; k < PAGE_SAMPLES; k++) for (const [i, page] of pages.entries()) ms[i].push((await timed(page.url, tk)).ms);
      ms.forEach((m, i) => {
        pageRounds[i].push(p99(m));
        pageReads[i].push(...m);
      });
    }
    for (const [i, page] of pages.entries()) {
      add(page.name, 'ms', p99(pageReads[i]), '<= 1.2x', within(1.2));
      console.log(
        `    p50 ${median(pageReads[i]).toFixed(1)} ms; each round's p99: ${pageRounds[i].map((v) => v.toFixed(1)).join(', ')} ms`,
      );
    }

    // Inbound: CPU per delivery, a receiver of the big tenant (no events target: stored, not delivered).
    const { id: receiverId, authorization } = await addReceiver(db, vaultKeys, BIG_TENANT);
    const inboundUrl = `${appUrl}/inbound/${BIG_TENANT}/${receiverId}`;
    const inboundHeaders = { 'content-type': 'application/json', authorization };
    await autocannon({
      url: inboundUrl,
      method: 'POST',
      headers: inboundHeaders,
      body: DELIVERY_BODY,
      connections: 20,
      amount: WARMUP_CALLS,
      timeout: 60,
    });
    const inboundRounds: Array<{ app: number; db: number }> = [];
    for (let round = 0; round < CPU_ROUNDS; round++)
      inboundRounds.push(
        await cpuPerOp(db, dbName, pid, async () => {
          const r = await autocannon({
            url: inboundUrl,
            method: 'POST',
            headers: inboundHeaders,
            body: DELIVERY_BODY,
            connections: 20,
            duration: SECONDS,
          });
          return r['2xx'];
        }),
      );
    add('inbound CPU per delivery (app + database)', 'µs', median(inboundRounds.map((r) => r.app + r.db)), '<= 1.1x', within(1.1));
    console.log(`    rounds (app + database µs): ${inboundRounds.map((r) => `${r.app.toFixed(0)} + ${r.db.toFixed(0)}`).join(', ')}`);

    // Console pages: what each answers and how many rows (it must never be all of them).
    // Each answered CONSOLE_SAMPLES times: the figure is the median answer.
    const consolePage = async (url: string) => {
      const answers: Array<{ ms: number; body: string }> = [];
      for (let k = 0; k < CONSOLE_SAMPLES; k++) answers.push(await timed(url, op));
      return { ms: median(answers.map((a) => a.ms)), body: answers[0].body };
    };
    const tenantsPage = await consolePage(`${appUrl}/v1/tenants?limit=100`);
    add('console tenants page answer', 'ms', tenantsPage.ms, '<= 1.2x', within(1.2));
    console.log(`    rows answered: ${(JSON.parse(tenantsPage.body) as unknown[]).length} of ${TENANTS} tenants`);
    const connectionsPage = await consolePage(`${base}/connections?limit=50`);
    add('console connections page answer', 'ms', connectionsPage.ms, '<= 1.2x', within(1.2));
    console.log(`    rows answered: ${(JSON.parse(connectionsPage.body) as { connections: unknown[] }).connections.length} of ${bigCount}`);
    const eventsPage = await consolePage(`${base}/events?limit=50`);
    add('console deliveries page answer', 'ms', eventsPage.ms, '<= 1.2x', within(1.2));
    console.log(
      `    rows answered: ${(JSON.parse(eventsPage.body) as { events: unknown[] }).events.length} of ${events / 2} events of the tenant`,
    );

    // A due batch: renewals per second and CPU per renewal. The same DUE connections are made due in each round,
    // after one round not counted (it opens the commit lane's backend and brings the rows' pages in, at every size
    // alike); the figures are the medians of the rounds.
    const dueRounds: Array<{ rate: number; app: number; db: number; lane: number }> = [];
    for (let round = -1; round < CPU_ROUNDS; round++) {
      const duePairs = await inParallel(DUE, 32, () => sandboxCall('alice'));
      let dueSeconds = 0;
      const cpu = await cpuPerOp(db, dbName, pid, async () => {
        const due = await makeDue(db, vaultKeys, 1, duePairs);
        dueSeconds = await renewed(db, due.at, due.ids, 600);
        return DUE;
      });
      if (round > -1) dueRounds.push({ rate: DUE / dueSeconds, ...cpu });
    }
    const renewal = {
      app: median(dueRounds.map((r) => r.app)),
      db: median(dueRounds.map((r) => r.db)),
      lane: median(dueRounds.map((r) => r.lane)),
    };
    add('renewals/s of a due batch', '/s', median(dueRounds.map((r) => r.rate)), '>= 0.9x', atLeast(0.9));
    add('CPU per renewal (app + database)', 'µs', median(dueRounds.map((r) => r.app + r.db)), '<= 1.1x', within(1.1));
    add('database CPU per renewal (the claim and the save)', 'µs', renewal.db, '<= 1.1x', within(1.1));
    add(
      "the claim's database CPU per renewal (the pool's statements)",
      'µs',
      median(dueRounds.map((r) => r.db - r.lane)),
      '<= 1.1x',
      within(1.1),
    );
    add("the save's database CPU per renewal (the commit lane's)", 'µs', renewal.lane, '<= 1.1x', within(1.1));
    console.log(
      `    rounds (app + pool + lane µs): ${dueRounds.map((r) => `${r.app.toFixed(0)} + ${(r.db - r.lane).toFixed(0)} + ${r.lane.toFixed(0)}`).join(', ')}`,
    );

    // A backlog after an outage: time to renew it, and the facade's rate meanwhile against its rate alone.
    // Only a size whose big tenant (half the connections, after the due batch) holds the backlog measures it.
    const backlog = Math.min(BACKLOG, bigCount - DUE - 1);
    // Nearly all of it is enough: 100,000 connections hold 49,599 of 50,000 (the per-1,000 figure compares).
    const holdsBacklog = backlog >= 0.9 * BACKLOG;
    const backlogPairs = await inParallel(backlog, 32, () => sandboxCall('alice'));
    const overdue = await makeDue(db, vaultKeys, DUE + 1, backlogPairs);
    // The bench's bulk write that made the backlog due (half the rows of a 100k table) would set autovacuum to
    // work on the same two cores while the facade's rate is taken: an outage makes rows due by the clock, not by a
    // write, so the bench cleans up after its own write first (the backlog is renewing meanwhile).
    await db.query('VACUUM ANALYZE connections');
    // The bench's own polling (a count over the backlog's ids) starts once the facade's rate is taken: run
    // meanwhile, its CPU on the same cores counted against the service. The time comes from the rows anyway.
    // The median of CPU_ROUNDS rounds, as the rate alone (a backlog of 10,000 lasts 100 s at the default pace).
    const duringRounds: number[] = [];
    for (let round = 0; round < CPU_ROUNDS; round++)
      duringRounds.push(
        (await autocannon({ url: `${base}/workflows`, headers: warmHeaders, connections: 20, duration: SECONDS })).requests.average,
      );
    const rateDuring = median(duringRounds);
    console.log(`    facade during the backlog, requests/s by round: ${duringRounds.map((r) => r.toFixed(0)).join(', ')}`);
    const seconds = await renewed(db, overdue.at, overdue.ids, 1800);
    console.log(`    backlog: ${backlog} overdue connections renewed in ${seconds.toFixed(1)} s`);
    add(
      'time to renew the backlog, per 1,000 overdue (linear: flat)',
      's',
      holdsBacklog ? (1000 * seconds) / backlog : Number.NaN,
      '<= 1.1x',
      within(1.1),
    );
    add('facade rate during the backlog / alone', 'x', holdsBacklog ? rateDuring / warmRate : Number.NaN, '>= 0.8', (_r, v) => v >= 0.8);
    add('RSS after the work above', 'MiB', rssMiB(pid), '<= +64 MiB', (_r, v, first) => v - first <= 64);
    await app.stop('SIGTERM');
    app = null;

    // An hour of renewals, compressed: this size's renewals of one hour (a connection every 0.8 of a 6-hour
    // token's life), made due at once on a service started afresh and unpaced (REFRESH_MAX_PER_SECOND=0), so that
    // 208,000 renewals at 1M take minutes rather than the hour; memory after start and after the last of them.
    const hour = Math.min(Math.round(size * RENEWALS_PER_HOUR_SHARE), bigCount - 1);
    const hourPairs = await inParallel(hour, 32, () => sandboxCall('alice'));
    const restarted = await startBenchApp(scratch.url, sandbox, vaultKeys, {
      REFRESH_INTERVAL_MS: '100',
      REFRESH_MAX_PER_SECOND: '0',
      NODE_OPTIONS: APP_NODE_OPTIONS,
    });
    app = restarted.app;
    const rssBeforeHour = rssMiB(app.pid);
    const hourDue = await makeDue(db, vaultKeys, 1, hourPairs);
    const hourSeconds = await renewed(db, hourDue.at, hourDue.ids, 3600);
    console.log(`    an hour's renewals: ${hour} in ${hourSeconds.toFixed(1)} s, RSS ${rssBeforeHour.toFixed(0)} MiB after start`);
    add("RSS after an hour's renewals (compressed)", 'MiB', rssMiB(app.pid), '<= +64 MiB', (_r, v, first) => v - first <= 64);
  } finally {
    await app?.stop('SIGTERM');
    await scratch.drop();
  }
  return figures;
}

async function main(): Promise<void> {
  console.log(
    `bench/scale.ts: sizes ${SIZES.join(', ')} connections over ${TENANTS} tenants; ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}, ` +
      `node ${process.version}, the service's NODE_OPTIONS "${APP_NODE_OPTIONS}", load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  const sandbox = await startSandbox();
  try {
    const results: Figure[][] = [];
    for (const size of SIZES) results.push(await runSize(size, sandbox));
    const first = results[0];
    console.log(`\n| figure | goal | ${SIZES.join(' | ')} | ratio ${SIZES.at(-1)} / smallest | |`);
    console.log(`|---|---|${SIZES.map(() => '---:').join('|')}|---:|---|`);
    for (const f of first) {
      const values = results.map((r) => r.find((x) => x.name === f.name)?.value ?? Number.NaN);
      // The ratio is to the smallest size that has the figure (the backlog's needs a size that holds it).
      const base = values.find((v) => !Number.isNaN(v)) ?? Number.NaN;
      const last = results.at(-1)?.find((x) => x.name === f.name);
      const ratio = (last?.value ?? Number.NaN) / base;
      const ok = last ? last.check(ratio, last.value, base) : false;
      console.log(
        `| ${f.name} (${f.unit}) | ${f.goal} | ${values.map((v) => (Number.isNaN(v) ? 'n/a' : v.toFixed(f.unit === 'x' ? 2 : 1))).join(' | ')} | ${ratio.toFixed(2)} | ${ok ? 'met' : 'MISSED'} |`,
      );
    }
    console.log(
      `\nload average at the end: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    sandbox.proc.kill('SIGTERM');
  }
}

finish(main());
