// CPU time of the inbound group INSERT alone (EventsRepository.recordMany), per event: this process and its
// PostgreSQL backend, groups of 25 events written one after another on TypeORM's pg pool, as the app does.
//   npx tsx bench/record-many.ts      (DATABASE_URL: a PostgreSQL server to create a scratch database on)
// Env: RECORD_GROUP (25), RECORD_GROUPS (4000), RECORD_ROUNDS (3), RECORD_SETUP (SQL run after the migrations, to try a
// schema change before writing its migration). Not part of `npm test`.
import 'reflect-metadata';
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { v7 as timeOrderedUuid } from 'uuid';
import { runMigrations } from '../src/database/migrate.js';
import { SystemClock } from '../src/common/clock.js';
import { EventsRepository, type NewEvent } from '../src/events/events.repository.js';
import { cpuMs, DELIVERY_BODY, median } from './harness.js';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const GROUP = Number(process.env.RECORD_GROUP ?? 25);
const GROUPS = Number(process.env.RECORD_GROUPS ?? 4000);
const ROUNDS = Number(process.env.RECORD_ROUNDS ?? 3);
const BODY = DELIVERY_BODY;

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

function group(): Array<NewEvent & { id: string }> {
  const events: Array<NewEvent & { id: string }> = [];
  for (let i = 0; i < GROUP; i++) {
    events.push({
      id: timeOrderedUuid(),
      tenantId: 'bench',
      source: 'upstream',
      type: 'workflow_step_updated',
      payload: JSON.parse(BODY) as unknown,
      payloadJson: BODY,
      receiverId: randomUUID(),
      traceparent: null,
    });
  }
  return events;
}

async function main(): Promise<void> {
  const name = `cws_record_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(SERVER_URL, name);
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  try {
    await runMigrations(url);
    await ds.initialize();
    if (process.env.RECORD_SETUP) await ds.query(process.env.RECORD_SETUP);
    await ds.query(`INSERT INTO tenants (id, name, environment, events_secret_enc) VALUES ('bench', 'Bench', 'sandbox', 'x')`);
    const repo = new EventsRepository(ds, new SystemClock());
    const groups = Array.from({ length: GROUPS }, group);
    for (let i = 0; i < 200; i++) await repo.recordMany(groups[i]); // warm-up: JIT, the statement prepared
    const backendPid = async (): Promise<number[]> =>
      (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [name])).rows.map((r) => r.pid);
    const app: number[] = [];
    const db: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const g of groups) for (const e of g) e.id = timeOrderedUuid();
      const pids = await backendPid();
      const dbBefore = pids.reduce((s, p) => s + cpuMs(p), 0);
      const before = process.cpuUsage();
      const started = performance.now();
      for (let i = 0; i < GROUPS; i++) await repo.recordMany(groups[i]);
      const wall = performance.now() - started;
      const used = process.cpuUsage(before);
      const dbMs = pids.reduce((s, p) => s + cpuMs(p), 0) - dbBefore;
      const n = GROUPS * GROUP;
      app.push((used.user + used.system) / n);
      db.push((dbMs * 1000) / n);
      console.log(
        `round ${round + 1}: app ${app[round].toFixed(1)} µs/event (user ${(used.user / n).toFixed(1)}, system ${(used.system / n).toFixed(1)}), ` +
          `backend ${db[round].toFixed(1)} µs/event, wall ${((wall * 1000) / GROUPS).toFixed(0)} µs/group`,
      );
    }
    console.log(`median: app ${median(app).toFixed(1)} + backend ${median(db).toFixed(1)} µs per event (${GROUP} per group)`);
  } finally {
    await ds.destroy().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
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
