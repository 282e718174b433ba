// Synced records at scale (docs/records.md), against the compiled service on a seeded database.
//   npx tsx bench/records.ts      (DATABASE_URL: a PostgreSQL server; a scratch database is made and dropped)
// Env: BENCH_SIZES (10000,100000,1000000 stored records), BENCH_READS (2000 a size and kind), BENCH_UNCHANGED (1000
// workflows), BENCH_BIG_LISTING (100000 workflows), BENCH_BIG_PAGE (1000 a page; 0: one page), BENCH_SHARE_USERS (1000),
// BENCH_SHARE_SECONDS (20 a phase), BENCH_SKIP_BUILD=1. BENCH_QUICK=1: 2000,20000 records, 200 reads, 10,000 workflows,
// 100 users, 10 s. Not part of `npm test`.
// 1. Reads as the copy grows: a 100-record page (GET …/records/workflows?userId&after) and a change-feed page (GET
//    …/records/workflows/changes?cursor) at each size, p50/p99 and the ratio largest/smallest size, against the floor:
//    a bare SELECT of the same rows by the same index over one pg connection, in the same run (its own ratio shows
//    what the database's growth is). Goal: flat within 1.1x, the page's p99 <= 5 ms. One user's 1,000 records and
//    their feed rows are sealed for real (the pages read them); the other rows, added per size with generate_series,
//    hold one sealed blob copied (never opened), spread over 99 users of the same tenant; then VACUUM ANALYZE.
// 2. An unchanged listing of BENCH_UNCHANGED workflows: upstream calls (the sandbox's count) and the rows it wrote
//    (records' row versions, pg_stat_user_tables of records, record_changes and events). Goal: 1 call, 0 writes.
// 3. A first listing of BENCH_BIG_LISTING workflows: the service's RSS growth, sampled every 50 ms. Goal: < 64 MiB.
// 4. Sync's share (400 reads/60 s, BENCH_SHARE_USERS synced users): a person's p95 (GET …/workflows at 5/s) with the
//    tenant's sync off, then while every user is listed; the ratio. Goal: <= 1.1x. The share itself (<= 25 % in any
//    60 s) is test/records-share.e2e-spec.ts's.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { encodeChangeCursor } from '../src/records/change-cursor.js';
import { cursorOf } from '../src/common/page-cursor.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { seedConnections as seedUsers } from '../test/support/seed-connections.js';
import { buildApp } from '../test/support/spawn-app.js';
import { finish, median } from './harness.js';
import { type BenchSandbox, p99, rssMiB, scratchDatabase, startBenchApp, startSandbox, tenantKey } from './measure.js';
import { BIG_TENANT, seedConnections, seedTenants } from './scale-seed.js';

const QUICK = Boolean(process.env.BENCH_QUICK);
const SIZES = (process.env.BENCH_SIZES ?? (QUICK ? '2000,20000' : '10000,100000,1000000')).split(',').map(Number);
const READS = Number(process.env.BENCH_READS ?? (QUICK ? 200 : 2000));
const UNCHANGED = Number(process.env.BENCH_UNCHANGED ?? 1000);
const BIG_LISTING = Number(process.env.BENCH_BIG_LISTING ?? (QUICK ? 10_000 : 100_000));
const BIG_PAGE = Number(process.env.BENCH_BIG_PAGE ?? 1000);
const SHARE_USERS = Number(process.env.BENCH_SHARE_USERS ?? (QUICK ? 100 : 1000));
const SHARE_SECONDS = Number(process.env.BENCH_SHARE_SECONDS ?? (QUICK ? 10 : 20));
const PROBE = 1000;
const PAGE = 100;
/** The probe user (the big tenant's first connection, scale-seed) and the 99 that hold the filler rows. */
const PROBE_USER = 'u-0';
const FILLER_USERS = 99;

/** An object of about the size the sandbox's workflows have (300 bytes). */
function workflow(id: string, i: number): string {
  return JSON.stringify({
    approvers: ['bob', 'carol'],
    createdAt: '2026-11-23T12:00:00.000Z',
    creator: 'alice',
    id,
    name: `Master services agreement ${i} – Globex`,
    step: 'Review',
    updatedAt: '2026-11-23T12:00:00.000Z',
    versionNumber: 1,
    attributes: { value: 1000 + i, region: 'EU' },
  });
}

function pct(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))];
}

const ms = (v: number) => v.toFixed(2);

/** One size of the copy: its own database, seeded, and its own service on it. */
interface Copy {
  size: number;
  url: string;
  key: string;
  probeXid: string;
  firstSeq: number;
  /** The floor's connection (application_name cws-bench). */
  floor: pg.Client;
  /** The seeding connection, the operator key and the service's pid (the listings and the share use the first size's). */
  db: pg.Client;
  operatorKey: string;
  appPid: number;
  close(): Promise<void>;
}

interface Probe {
  ids: string[];
  records: string[];
  feed: string[];
}

/** The probe user's 1,000 workflows, sealed once for the records and the feed (the same ids in every database). */
async function probeRows(vault: TokenVault): Promise<Probe> {
  const owner = `${BIG_TENANT}/${PROBE_USER}`;
  const ids = Array.from({ length: PROBE }, (_, i) => `wf_p${String(i).padStart(5, '0')}`);
  const objects = ids.map((id, i) => workflow(id, i));
  const seal = (table: string) =>
    Promise.all(ids.map((id, i) => vault.seal(objects[i], { table, id: `${owner}/${id}`, column: 'data_enc', tenantId: BIG_TENANT })));
  return { ids, records: await seal('records'), feed: await seal('record_changes') };
}

async function copyOf(size: number, sandbox: BenchSandbox, vaultKeys: string, probe: Probe): Promise<Copy> {
  const seedStart = performance.now();
  const scratch = await scratchDatabase(`cws_bench_records_${size}`);
  const db = scratch.db;
  const alice = await sandbox.tokens('alice');
  await seedTenants(db, vaultKeys, 2);
  await seedConnections(db, vaultKeys, {
    tenants: 2,
    connections: 2 * (FILLER_USERS + 1),
    accessToken: alice.access_token,
    accessExpiresAt: new Date(Date.now() + alice.expiresIn * 1000),
  });
  const users = (
    await db.query<{ id: string; user_id: string }>(`SELECT id, user_id FROM connections WHERE tenant_id = $1 ORDER BY user_id`, [
      BIG_TENANT,
    ])
  ).rows;
  const probeConnection = users.find((u) => u.user_id === PROBE_USER)!;
  const fillers = users.filter((u) => u.user_id !== PROBE_USER).slice(0, FILLER_USERS);
  await db.query('BEGIN');
  await db.query(
    `INSERT INTO records (connection_id, workflow_id, tenant_id, user_id, data_enc, digest, version, last_modified)
     SELECT $1, u.id, $2, $3, u.data, md5(u.id), 1, now() FROM unnest($4::text[], $5::text[]) AS u(id, data)`,
    [probeConnection.id, BIG_TENANT, PROBE_USER, probe.ids, probe.records],
  );
  const feed = await db.query<{ xid: string; seq: string }>(
    `INSERT INTO record_changes (tenant_id, connection_id, user_id, workflow_id, action, version, last_modified, data_enc)
     SELECT $1, $2, $3, u.id, 'added', 1, now(), u.data FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS u(id, data, ord)
      ORDER BY u.ord RETURNING writer_xid::text AS xid, seq`,
    [BIG_TENANT, probeConnection.id, PROBE_USER, probe.ids, probe.feed],
  );
  await db.query('COMMIT');
  // The rest: one sealed blob copied (never opened), over the other users, 100,000 rows a statement (a transaction each).
  for (let from = PROBE; from < size; from += 100_000) {
    const values = [
      fillers.map((f) => f.id),
      fillers.map((f) => f.user_id),
      BIG_TENANT,
      probe.records[0],
      from,
      Math.min(size, from + 100_000) - 1,
    ];
    await db.query(
      `INSERT INTO records (connection_id, workflow_id, tenant_id, user_id, data_enc, digest, version, last_modified)
       SELECT ($1::uuid[])[1 + g % array_length($1::uuid[], 1)], 'wf_' || lpad(g::text, 9, '0'), $3,
              ($2::text[])[1 + g % array_length($1::uuid[], 1)], $4, md5(g::text), 1, now()
         FROM generate_series($5::int, $6::int) g`,
      values,
    );
    await db.query(
      `INSERT INTO record_changes (tenant_id, connection_id, user_id, workflow_id, action, version, last_modified, data_enc)
       SELECT $3, ($1::uuid[])[1 + g % array_length($1::uuid[], 1)], ($2::text[])[1 + g % array_length($1::uuid[], 1)],
              'wf_' || lpad(g::text, 9, '0'), 'added', 1, now(), $4
         FROM generate_series($5::int, $6::int) g ORDER BY g`,
      values,
    );
  }
  await db.query('VACUUM ANALYZE');
  await db.query('CHECKPOINT');
  const [{ n }] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM records`)).rows;
  const { app, operatorKey } = await startBenchApp(scratch.url, sandbox, vaultKeys, { SYNC_POLL_INTERVAL: '1s' });
  const floor = new pg.Client({ connectionString: scratch.url, application_name: 'cws-bench' });
  await floor.connect();
  console.log(`${n.toLocaleString('en')} records stored and a service on them (${((performance.now() - seedStart) / 1000).toFixed(1)} s)`);
  return {
    size: n,
    url: app.url,
    key: await tenantKey(app.url, operatorKey, BIG_TENANT),
    probeXid: feed.rows[0].xid,
    firstSeq: Math.min(...feed.rows.map((r) => Number(r.seq))),
    floor,
    db,
    operatorKey,
    appPid: app.pid,
    async close() {
      await floor.end().catch(() => undefined);
      await app.stop('SIGTERM');
      await scratch.drop();
    },
  };
}

const PAGE_SQL = `SELECT connection_id, tenant_id, user_id, workflow_id, data_enc, version, last_modified, synced_at FROM records
   WHERE tenant_id = $1 AND deleted_at IS NULL AND user_id = $2 AND (user_id, workflow_id) > ($2, $3::text)
   ORDER BY user_id, workflow_id LIMIT ${PAGE + 1}`;
const FEED_SQL = `SELECT seq, writer_xid::text, user_id, workflow_id, action, version, last_modified, data_enc, changed_at, connection_id, tenant_id
    FROM record_changes c WHERE c.tenant_id = $1 AND (c.writer_xid, c.seq) > ($2::xid8, $3::bigint)
   ORDER BY c.writer_xid, c.seq LIMIT ${PAGE}`;

async function timedGet(url: string, key: string, rows: number): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  const elapsed = performance.now() - t;
  if (res.status !== 200 || (JSON.parse(text) as { items: unknown[] }).items.length !== rows)
    throw new Error(`${url} answered ${res.status}: ${text.slice(0, 300)}`);
  return elapsed;
}

async function timedSql(db: pg.Client, sql: string, values: unknown[], rows: number): Promise<number> {
  const t = performance.now();
  const r = await db.query(sql, values);
  const elapsed = performance.now() - t;
  if (r.rows.length !== rows) throw new Error(`the floor read ${r.rows.length} rows, not ${rows}`);
  return elapsed;
}

interface Figures {
  page: number[];
  feed: number[];
  pageFloor: number[];
  feedFloor: number[];
}

/** One read of each kind from every size, the sizes in a new order each round (the machine's load falls on all alike). */
async function readRound(copies: Copy[], probe: Probe, figures: Figures[] | null): Promise<void> {
  // Positions with a full page after them (and one row more, the service's look-ahead) in the probe's rows.
  const at = () => Math.floor(Math.random() * (PROBE - PAGE - 1));
  const order = copies.map((_, i) => i).sort(() => Math.random() - 0.5);
  for (const i of order) {
    const c = copies[i];
    const page = `${c.url}/v1/tenants/${BIG_TENANT}/records/workflows?userId=${PROBE_USER}&limit=${PAGE}&after=${cursorOf(`r|${JSON.stringify([PROBE_USER, probe.ids[at()]])}`)}`;
    const feed = `${c.url}/v1/tenants/${BIG_TENANT}/records/workflows/changes?limit=${PAGE}&cursor=${encodeChangeCursor({ writerXid: c.probeXid, seq: c.firstSeq + at(), at: Date.now() })}`;
    const f = figures?.[i];
    const times = [
      await timedGet(page, c.key, PAGE),
      await timedGet(feed, c.key, PAGE),
      await timedSql(c.floor, PAGE_SQL, [BIG_TENANT, PROBE_USER, probe.ids[at()]], PAGE + 1),
      await timedSql(c.floor, FEED_SQL, [BIG_TENANT, c.probeXid, c.firstSeq + at()], PAGE),
    ];
    if (f) {
      f.page.push(times[0]);
      f.feed.push(times[1]);
      f.pageFloor.push(times[2]);
      f.feedFloor.push(times[3]);
    }
  }
}

async function main(): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) buildApp();
  const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const sandbox = await startSandbox();
  const copies: Array<Copy> = [];
  try {
    // 1. Reads at each size, interleaved.
    const probe = await probeRows(vault);
    for (const size of SIZES) copies.push(await copyOf(size, sandbox, vaultKeys, probe));
    for (let i = 0; i < Math.min(200, READS); i++) await readRound(copies, probe, null);
    const results: Figures[] = copies.map(() => ({ page: [], feed: [], pageFloor: [], feedFloor: [] }));
    for (let i = 0; i < READS; i++) await readRound(copies, probe, results);
    copies.forEach((c, i) => {
      const r = results[i];
      console.log(
        `${c.size.toLocaleString('en')} records: page p50 ${ms(median(r.page))} p99 ${ms(p99(r.page))} ms (floor p50 ${ms(median(r.pageFloor))} p99 ${ms(p99(r.pageFloor))});` +
          ` feed page p50 ${ms(median(r.feed))} p99 ${ms(p99(r.feed))} ms (floor p50 ${ms(median(r.feedFloor))} p99 ${ms(p99(r.feedFloor))})`,
      );
    });
    const largest = copies[copies.length - 1];
    for (const [name, sql, values] of [
      ['page', PAGE_SQL, [BIG_TENANT, PROBE_USER, probe.ids[450]]],
      ['feed', FEED_SQL, [BIG_TENANT, largest.probeXid, largest.firstSeq + 450]],
    ] as const) {
      const plan = await largest.floor.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${sql}`, [...values]);
      const lines = plan.rows.map((p) => p['QUERY PLAN'].trim()).filter((l) => /Index Scan|Buffers|Execution/.test(l));
      console.log(`  plan of the ${name} at ${largest.size.toLocaleString('en')}: ${[...new Set(lines)].join(' | ')}`);
    }
    const [first, last] = [results[0], results[results.length - 1]];
    for (const kind of ['page', 'feed'] as const) {
      const fk = kind === 'page' ? 'pageFloor' : 'feedFloor';
      console.log(
        `${kind}: ${largest.size.toLocaleString('en')}/${copies[0].size.toLocaleString('en')} records: p50 ${(median(last[kind]) / median(first[kind])).toFixed(2)}x, ` +
          `p99 ${(p99(last[kind]) / p99(first[kind])).toFixed(2)}x (floor p50 ${(median(last[fk]) / median(first[fk])).toFixed(2)}x, ` +
          `p99 ${(p99(last[fk]) / p99(first[fk])).toFixed(2)}x); service/floor p50 ${(median(last[kind]) / median(last[fk])).toFixed(1)}x` +
          (kind === 'page' ? `; goal: flat within 1.1x, p99 <= 5 ms (p99 ${ms(p99(last.page))} ms)` : '; goal: flat within 1.1x'),
      );
    }
    // The listings and the share run on the smallest size's service, the others stopped.
    for (const c of copies.splice(1)) await c.close();
    const { db, operatorKey } = copies[0];
    const app = { url: copies[0].url, pid: copies[0].appPid };
    const op = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };

    // 2 and 3: listings of users of tenants of their own, sync on for that tenant only.
    async function syncedTenant(id: string, upstreamUser: string, count: number): Promise<string> {
      await fetch(`${app.url}/v1/tenants`, {
        method: 'POST',
        headers: op,
        body: JSON.stringify({ id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
      });
      const pair = await sandbox.tokens(upstreamUser);
      await seedUsers(
        db,
        vaultKeys,
        Array.from({ length: count }, (_, i) => ({
          tenantId: id,
          userId: `u-${i}`,
          upstreamUserId: upstreamUser,
          tokens: { ...pair, scope: ['workflows.read'], family: '' },
        })),
      );
      return tenantKey(app.url, operatorKey, id);
    }
    async function control(path: string, body: unknown): Promise<void> {
      const res = await fetch(`${sandbox.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
    }
    async function listed(
      tenant: string,
      tkey: string,
      before: string | null,
      timeoutMs: number,
    ): Promise<{ lastListedAt: string; records: number }> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const res = await fetch(`${app.url}/v1/tenants/${tenant}/sync?userId=u-0`, { headers: { authorization: `Bearer ${tkey}` } });
        const s = ((await res.json()) as { items: Array<{ lastListedAt: string | null; records: number; state: string }> }).items[0];
        if (s?.lastListedAt && s.lastListedAt !== before) return { lastListedAt: s.lastListedAt, records: s.records };
        if (Date.now() > deadline) throw new Error(`no listing of ${tenant} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    async function setSync(tenant: string, on: boolean): Promise<void> {
      const res = await fetch(`${app.url}/v1/tenants/${tenant}`, {
        method: 'PATCH',
        headers: op,
        body: JSON.stringify({ sync: { workflows: on } }),
      });
      if (res.status !== 200) throw new Error(`PATCH ${tenant} answered ${res.status}`);
    }
    async function syncNow(tenant: string): Promise<void> {
      const res = await fetch(`${app.url}/v1/tenants/${tenant}/sync`, { method: 'POST', headers: op, body: '{}' });
      if (res.status !== 202) throw new Error(`POST sync answered ${res.status}`);
    }
    const stats = async () => ((await (await fetch(`${sandbox.url}/_sandbox/stats`)).json()) as { resourceCalls: number }).resourceCalls;
    const tuples = async () => {
      await new Promise((r) => setTimeout(r, 1500)); // the backends' statistics are flushed within a second
      const r = await db.query<{ relname: string; w: string }>(
        `SELECT relname, (n_tup_ins + n_tup_upd + n_tup_del)::text AS w FROM pg_stat_user_tables WHERE relname IN ('records', 'record_changes', 'events')`,
      );
      return Object.fromEntries(r.rows.map((x) => [x.relname, Number(x.w)]));
    };
    const versions = async (tenant: string) =>
      (
        await db.query<{ v: string }>(
          `SELECT md5(string_agg(xmin::text, ',' ORDER BY workflow_id)) AS v FROM records WHERE tenant_id = $1`,
          [tenant],
        )
      ).rows[0].v;

    await control('/_sandbox/workflows/bulk', { userId: 'bob', count: UNCHANGED });
    const bobKey = await syncedTenant('unchanged', 'bob', 1);
    await setSync('unchanged', true);
    await syncNow('unchanged');
    const firstListing = await listed('unchanged', bobKey, null, 120_000);
    const [calls0, tup0, v0] = [await stats(), await tuples(), await versions('unchanged')];
    await syncNow('unchanged');
    const again = await listed('unchanged', bobKey, firstListing.lastListedAt, 60_000);
    const [calls1, tup1, v1] = [await stats(), await tuples(), await versions('unchanged')];
    await setSync('unchanged', false);
    const written = Object.keys(tup1).map((t) => `${t} ${tup1[t] - tup0[t]}`);
    console.log(
      `unchanged listing of ${again.records.toLocaleString('en')} workflows: ${calls1 - calls0} upstream call(s), rows written: ${written.join(', ')}, ` +
        `records' row versions ${v0 === v1 ? 'unchanged' : 'CHANGED'} (goal: 1 call, 0 writes)`,
    );

    await control('/_sandbox/workflows/bulk', { userId: 'carol', count: BIG_LISTING });
    if (BIG_PAGE > 0) await control('/_sandbox/listing', { pageSize: BIG_PAGE });
    const carolKey = await syncedTenant('bulk', 'carol', 1);
    const rssBefore = rssMiB(app.pid);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(app.pid))), 50);
    const listStart = performance.now();
    await setSync('bulk', true);
    await syncNow('bulk');
    const big = await listed('bulk', carolKey, null, 1_800_000);
    clearInterval(sampler);
    await setSync('bulk', false);
    await control('/_sandbox/listing', { pageSize: null });
    console.log(
      `first listing of ${big.records.toLocaleString('en')} workflows (${BIG_PAGE > 0 ? `pages of ${BIG_PAGE}` : 'one page'}): ` +
        `${((performance.now() - listStart) / 1000).toFixed(1)} s, RSS ${rssBefore.toFixed(0)} -> peak ${rssPeak.toFixed(0)} MiB, growth ${(rssPeak - rssBefore).toFixed(1)} MiB (goal < 64 MiB)`,
    );

    // 4. A person's p95 with sync's share in use, against the same person before it and, at the same time, against a
    // person of a tenant that does not sync (the floor in the same run: the machine's load falls on both alike).
    const shareKey = await syncedTenant('share', 'alice', SHARE_USERS);
    const calmKey = await syncedTenant('calm', 'alice', 1);
    for (const tenant of ['share', 'calm']) {
      const patched = await fetch(`${app.url}/v1/tenants/${tenant}`, {
        method: 'PATCH',
        headers: op,
        body: JSON.stringify({ quotas: { read: '400/60s' } }),
      });
      if (patched.status !== 200) throw new Error(`PATCH quotas answered ${patched.status}`);
    }
    async function personOf(tenant: string, tkey: string): Promise<number> {
      const t = performance.now();
      const res = await fetch(`${app.url}/v1/tenants/${tenant}/workflows?step=Review`, {
        headers: { authorization: `Bearer ${tkey}`, 'x-user-id': 'u-0' },
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`a person's call answered ${res.status}`);
      return performance.now() - t;
    }
    /** A call of each tenant's person every 400 ms, in turn (2.5 calls a second each). */
    async function people(seconds: number): Promise<{ share: number[]; calm: number[] }> {
      const out = { share: [] as number[], calm: [] as number[] };
      const end = Date.now() + seconds * 1000;
      for (let next = Date.now(), i = 0; next < end; next += 200, i++) {
        await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
        if (i % 2 === 0) out.share.push(await personOf('share', shareKey));
        else out.calm.push(await personOf('calm', calmKey));
      }
      return out;
    }
    await people(2); // warm-up
    const idle = await people(SHARE_SECONDS);
    const callsBefore = await stats();
    await setSync('share', true);
    await syncNow('share');
    const busy = await people(SHARE_SECONDS);
    const syncCalls = (await stats()) - callsBefore - busy.share.length - busy.calm.length;
    const p95 = (v: number[]) => pct(v, 0.95);
    console.log(
      `a person's GET /workflows, 400 reads/60 s, ${SHARE_USERS} synced users: p95 before ${ms(p95(idle.share))} ms, while syncing ${ms(p95(busy.share))} ms ` +
        `(${(p95(busy.share) / p95(idle.share)).toFixed(2)}x); a tenant that does not sync, meanwhile: ${ms(p95(busy.calm))} ms (before ${ms(p95(idle.calm))}): ` +
        `syncing/not syncing at the same time ${(p95(busy.share) / p95(busy.calm)).toFixed(2)}x (goal <= 1.1x); sync's upstream calls meanwhile ${syncCalls} ` +
        `(its share: ${Math.floor(400 * 0.25)} a minute)`,
    );
  } finally {
    for (const c of copies) await c.close();
    sandbox.proc.kill('SIGTERM');
  }
}

finish(main());
