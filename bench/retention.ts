// Cost does not grow with age (docs/data-retention.md, "What is kept"): two scratch databases, one whose events table
// is empty and one that received BENCH_EVENTS events over BENCH_DAYS simulated days (the service's clock moved a
// day at a time, the day's rows seeded with SQL, the day's retention run as the scheduler runs it: partitions
// ahead, days past the window dropped, a shorter tenant window swept), then alternating rounds on both of:
//   - inbound: events accepted per second through the inbound statement (EventsRepository.recordMany, groups of 50);
//   - newest page: the events API's read of a tenant's 50 newest events (EventsRepository.listAfter), ms per read;
//   - sweep: expired events of a tenant with a shorter window removed per second (EventsRemoval.removeSomeOfTenant).
// Prints each figure on both, the ratios aged/empty, and the database size per simulated week.
//   npx tsx bench/retention.ts        (DATABASE_URL: a PostgreSQL server to create the scratch databases on)
// Env: BENCH_EVENTS (1000000; the issue's figure is 10000000), BENCH_DAYS (60), BENCH_TENANTS (50), BENCH_ROUNDS (3),
// BENCH_SECONDS (3), EVENT_RETENTION_DAYS (30). Not part of `npm test`.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { v7 as timeOrderedUuid } from 'uuid';
import { Clock } from '../src/common/clock.js';
import { runMigrations } from '../src/database/migrate.js';
import { DAY_MS, EventPartitions, startOfDay } from '../src/events/event-partitions.js';
import { EventsRemoval } from '../src/events/events-removal.repository.js';
import { EventsRepository, type NewEvent } from '../src/events/events.repository.js';
import { PARTITIONS_AHEAD_DAYS } from '../src/retention/retention.service.js';
import { DELIVERY_BODY, median } from './harness.js';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const DAYS = Number(process.env.BENCH_DAYS ?? 60);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WINDOW = Number(process.env.EVENT_RETENTION_DAYS ?? 30);
/** The tenant with a shorter window, swept by the bench as by the scheduler. */
const SHORT_WINDOW = 7;
const GROUP = 50;
const SWEEP_ROWS = 5000;

class BenchClock extends Clock {
  constructor(public at: number) {
    super();
  }
  now(): Date {
    return new Date(this.at);
  }
}

interface Db {
  name: string;
  ds: DataSource;
  events: EventsRepository;
  removal: EventsRemoval;
  partitions: EventPartitions;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function open(admin: pg.Client, clock: Clock, tag: string): Promise<Db> {
  const name = `cws_retention_${tag}_${process.pid}_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(SERVER_URL, name);
  await runMigrations(url);
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 4 } });
  await ds.initialize();
  const tenants = Array.from({ length: TENANTS }, (_, i) => `t${i}`);
  await ds.query(
    `INSERT INTO tenants (id, name, environment, events_secret_enc, event_retention_days)
     SELECT id, id, 'sandbox', 'x', CASE WHEN id = 't1' THEN ${SHORT_WINDOW} END FROM unnest($1::text[]) AS id`,
    [tenants],
  );
  return { name, ds, events: new EventsRepository(ds, clock), removal: new EventsRemoval(ds), partitions: new EventPartitions(ds) };
}

/** What the scheduler does once a day of the simulation: days ahead, days past the window dropped, the short window swept. */
async function retentionRun(db: Db, now: Date): Promise<void> {
  await db.partitions.ensure(now, PARTITIONS_AHEAD_DAYS);
  await db.partitions.dropBefore(new Date(startOfDay(now).getTime() - WINDOW * DAY_MS));
  while ((await db.removal.removeSomeOfTenant('t1', new Date(now.getTime() - SHORT_WINDOW * DAY_MS), 5000)) > 0);
}

/** One simulated day's events, spread over the day and the tenants, seeded with SQL. */
async function seedDay(db: Db, dayStart: number, count: number): Promise<void> {
  const chunk = 100_000;
  for (let done = 0; done < count; done += chunk) {
    const n = Math.min(chunk, count - done);
    await db.ds.query(
      `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state, delivery_attempts, delivered_at)
       SELECT gen_random_uuid(), 't' || (g % $4), 'upstream', 'workflow_step_updated', $3::jsonb,
              $1::timestamptz + (g::float8 / $2) * interval '1 day', 'delivered', 1, $1::timestamptz
         FROM generate_series($5::int, $5::int + $2 - 1) AS g`,
      [new Date(dayStart), n, DELIVERY_BODY, TENANTS, done],
    );
  }
}

async function inboundRate(db: Db): Promise<number> {
  const group = (): Array<NewEvent & { id: string }> =>
    Array.from({ length: GROUP }, () => ({
      id: timeOrderedUuid(),
      tenantId: 't0',
      source: 'upstream' as const,
      type: 'workflow_step_updated',
      payload: null,
      payloadJson: DELIVERY_BODY,
    }));
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  let n = 0;
  while (performance.now() < until) {
    // Four group commits in flight, as several instances (or INBOUND_COMMITS_IN_FLIGHT) write.
    await Promise.all([1, 2, 3, 4].map(() => db.events.recordMany(group())));
    n += 4 * GROUP;
  }
  return n / ((performance.now() - started) / 1000);
}

async function newestPageMs(db: Db, clock: Clock): Promise<number> {
  const keptSince = new Date(clock.now().getTime() - WINDOW * DAY_MS);
  const [at] = (await db.ds.query(
    `SELECT writer_xid::text AS x, seq FROM events WHERE tenant_id = 't2' AND received_at >= $1
      ORDER BY writer_xid DESC, seq DESC OFFSET 50 LIMIT 1`,
    [keptSince],
  )) as Array<{ x: string; seq: string }>;
  const position = at ? { writerXid: at.x, seq: Number(at.seq) } : { writerXid: '0', seq: 0 };
  const times: number[] = [];
  const until = performance.now() + SECONDS * 1000;
  while (performance.now() < until) {
    const t0 = performance.now();
    await db.events.listAfter('t2', position, 50, keptSince);
    times.push(performance.now() - t0);
  }
  return median(times);
}

async function sweepRate(db: Db, clock: Clock): Promise<number> {
  const now = clock.now().getTime();
  const expiredAt = new Date(now - (SHORT_WINDOW + 1) * DAY_MS);
  await db.partitions.ensure(expiredAt, 1);
  await db.ds.query(
    `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state)
     SELECT gen_random_uuid(), 't1', 'upstream', 'workflow_step_updated', $2::jsonb, $1, 'delivered' FROM generate_series(1, ${SWEEP_ROWS})`,
    [expiredAt, DELIVERY_BODY],
  );
  const started = performance.now();
  let removed = 0;
  for (;;) {
    const n = await db.removal.removeSomeOfTenant('t1', new Date(now - SHORT_WINDOW * DAY_MS), 1000);
    removed += n;
    if (n === 0) break;
  }
  return removed / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await admin.connect();
  // Day 0 of the simulation: the first day after the partition that holds the tables from before partitioning.
  const day0 = startOfDay(new Date()).getTime() + 2 * DAY_MS;
  const clock = new BenchClock(day0 + DAYS * DAY_MS + DAY_MS / 2);
  const seedClock = new BenchClock(day0);
  const dbs: Db[] = [];
  try {
    const empty = await open(admin, clock, 'empty');
    dbs.push(empty);
    const aged = await open(admin, seedClock, 'aged');
    dbs.push(aged);
    // The same days as the aged one will have, without a row: only what is stored differs.
    await empty.partitions.ensure(new Date(clock.at - (WINDOW + 1) * DAY_MS), WINDOW + 4);
    await retentionRun(empty, clock.now());

    console.log(`seeding ${EVENTS} events over ${DAYS} simulated days, ${TENANTS} tenants, window ${WINDOW} days (t1: ${SHORT_WINDOW})`);
    console.log('simulated day | stored events | database size (MB)');
    const perDay = Math.round(EVENTS / DAYS);
    const seedStarted = performance.now();
    const sizes: Array<[number, number, number]> = [];
    for (let d = 0; d < DAYS; d++) {
      seedClock.at = day0 + d * DAY_MS;
      await retentionRun(aged, seedClock.now());
      await seedDay(aged, seedClock.at, perDay);
      if ((d + 1) % 7 === 0 || d === DAYS - 1) {
        await aged.ds.query('VACUUM events');
        const [{ n }] = (await aged.ds.query(`SELECT count(*)::bigint AS n FROM events`)) as Array<{ n: string }>;
        const [{ size }] = (await admin.query(`SELECT pg_database_size($1) AS size`, [aged.name])).rows as Array<{ size: string }>;
        sizes.push([d + 1, Number(n), Number(size) / 1e6]);
        console.log(`${String(d + 1).padStart(13)} | ${n.padStart(13)} | ${(Number(size) / 1e6).toFixed(1).padStart(18)}`);
      }
    }
    console.log(`seeded in ${((performance.now() - seedStarted) / 1000).toFixed(0)} s`);
    // The aged database now runs at the same simulated time as the empty one.
    seedClock.at = clock.at;
    await retentionRun(aged, clock.now());
    // Both hold the page that is read: the newest events of t2, received in the last hour.
    for (const db of [empty, aged]) {
      await db.ds.query(
        `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state)
         SELECT gen_random_uuid(), 't2', 'upstream', 'workflow_step_updated', $2::jsonb, $1::timestamptz + g * interval '1 second', 'delivered'
           FROM generate_series(1, 200) AS g`,
        [new Date(clock.at - 3_600_000), DELIVERY_BODY],
      );
      await db.ds.query('ANALYZE');
    }

    const figures = { inbound: [[], []] as number[][], newest: [[], []] as number[][], sweep: [[], []] as number[][] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, db] of [empty, aged].entries()) {
        figures.inbound[i].push(await inboundRate(db));
        figures.newest[i].push(await newestPageMs(db, clock));
        figures.sweep[i].push(await sweepRate(db, clock));
      }
    }
    const [{ n: storedAged }] = (await aged.ds.query(`SELECT count(*)::bigint AS n FROM events`)) as Array<{ n: string }>;
    console.log(`\nmedians of ${ROUNDS} alternating rounds; aged database holds ${storedAged} events`);
    console.log('figure                      |      empty |       aged | aged/empty');
    const row = (name: string, [a, b]: number[][], unit: string) => {
      const e = median(a);
      const g = median(b);
      console.log(
        `${name.padEnd(27)} | ${e.toFixed(2).padStart(10)} | ${g.toFixed(2).padStart(10)} | ${(g / e).toFixed(3).padStart(10)}  (${unit})`,
      );
    };
    row('inbound accepted/s', figures.inbound, 'higher is better');
    row('newest page, ms per read', figures.newest, 'lower is better');
    row('sweep, events removed/s', figures.sweep, 'higher is better');
    const full = sizes.filter(([day]) => day >= WINDOW + 7);
    if (full.length >= 2)
      console.log(
        `size once the window is full: ${full.map(([day, , mb]) => `day ${day}: ${mb.toFixed(1)} MB`).join(', ')} (last/first ${(full.at(-1)![2] / full[0][2]).toFixed(3)})`,
      );
  } finally {
    for (const db of dbs) await db.ds.destroy().catch(() => undefined);
    if (!process.env.BENCH_KEEP)
      for (const db of dbs) await admin.query(`DROP DATABASE IF EXISTS ${db.name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
