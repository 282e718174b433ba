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
import { p99, rssMiB, scratchDatabase, startBenchApp, startSandbox, tenantKey } from './measure.js';
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

async function main(): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) buildApp();
  const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const sandbox = await startSandbox();
  const scratch = await scratchDatabase('cws_bench_records');
  const db = scratch.db;
  let stopApp = async (): Promise<unknown> => undefined;
  try {
    const alice = await sandbox.tokens('alice');
    await seedTenants(db, vaultKeys, 2);
    await seedConnections(db, vaultKeys, {
      tenants: 2,
      connections: 2 * (FILLER_USERS + 1),
      accessToken: alice.access_token,
      accessExpiresAt: new Date(Date.now() + alice.expiresIn * 1000),
    });
    const { app, operatorKey } = await startBenchApp(scratch.url, sandbox, vaultKeys, { SYNC_POLL_INTERVAL: '1s' });
    stopApp = () => app.stop('SIGTERM');
    const op = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };
    const key = await tenantKey(app.url, operatorKey, BIG_TENANT);
    const auth = { authorization: `Bearer ${key}` };

    // 1. Reads as the copy grows.
    const users = (
      await db.query<{ id: string; user_id: string }>(`SELECT id, user_id FROM connections WHERE tenant_id = $1 ORDER BY user_id`, [
        BIG_TENANT,
      ])
    ).rows;
    const probe = users.find((u) => u.user_id === PROBE_USER)!;
    const fillers = users.filter((u) => u.user_id !== PROBE_USER).slice(0, FILLER_USERS);
    const probeIds = Array.from({ length: PROBE }, (_, i) => `wf_p${String(i).padStart(5, '0')}`);
    const owner = `${BIG_TENANT}/${PROBE_USER}`;
    const objects = probeIds.map((id, i) => workflow(id, i));
    const sealedRecords = await Promise.all(
      probeIds.map((id, i) => vault.seal(objects[i], { table: 'records', id: `${owner}/${id}`, column: 'data_enc', tenantId: BIG_TENANT })),
    );
    const sealedFeed = await Promise.all(
      probeIds.map((id, i) =>
        vault.seal(objects[i], { table: 'record_changes', id: `${owner}/${id}`, column: 'data_enc', tenantId: BIG_TENANT }),
      ),
    );
    await db.query('BEGIN');
    await db.query(
      `INSERT INTO records (connection_id, workflow_id, tenant_id, user_id, data_enc, digest, version, last_modified)
       SELECT $1, u.id, $2, $3, u.data, md5(u.id), 1, now() FROM unnest($4::text[], $5::text[]) AS u(id, data)`,
      [probe.id, BIG_TENANT, PROBE_USER, probeIds, sealedRecords],
    );
    const feed = await db.query<{ xid: string; seq: string }>(
      `INSERT INTO record_changes (tenant_id, connection_id, user_id, workflow_id, action, version, last_modified, data_enc)
       SELECT $1, $2, $3, u.id, 'added', 1, now(), u.data FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS u(id, data, ord)
        ORDER BY u.ord RETURNING writer_xid::text AS xid, seq`,
      [BIG_TENANT, probe.id, PROBE_USER, probeIds, sealedFeed],
    );
    await db.query('COMMIT');
    const probeXid = feed.rows[0].xid;
    const firstSeq = Math.min(...feed.rows.map((r) => Number(r.seq)));
    const blob = sealedRecords[0];

    const pageUrl = (i: number) =>
      `${app.url}/v1/tenants/${BIG_TENANT}/records/workflows?userId=${PROBE_USER}&limit=${PAGE}&after=${cursorOf(`r|${JSON.stringify([PROBE_USER, probeIds[i]])}`)}`;
    const feedUrl = (i: number) =>
      `${app.url}/v1/tenants/${BIG_TENANT}/records/workflows/changes?limit=${PAGE}&cursor=${encodeChangeCursor({ writerXid: probeXid, seq: firstSeq + i, at: Date.now() })}`;
    const PAGE_SQL = `SELECT connection_id, tenant_id, user_id, workflow_id, data_enc, version, last_modified, synced_at FROM records
       WHERE tenant_id = $1 AND deleted_at IS NULL AND user_id = $2 AND (user_id, workflow_id) > ($2, $3::text)
       ORDER BY user_id, workflow_id LIMIT ${PAGE + 1}`;
    const FEED_SQL = `SELECT seq, writer_xid::text, user_id, workflow_id, action, version, last_modified, data_enc, changed_at, connection_id, tenant_id
        FROM record_changes c WHERE c.tenant_id = $1 AND (c.writer_xid, c.seq) > ($2::xid8, $3::bigint)
       ORDER BY c.writer_xid, c.seq LIMIT ${PAGE}`;
    const floorDb = new pg.Client({ connectionString: scratch.url, application_name: 'cws-bench' });
    await floorDb.connect();

    async function timedGet(url: string, check: (body: { items: unknown[] }) => boolean): Promise<number> {
      const t = performance.now();
      const res = await fetch(url, { headers: auth });
      const text = await res.text();
      const elapsed = performance.now() - t;
      if (res.status !== 200 || !check(JSON.parse(text) as { items: unknown[] }))
        throw new Error(`${url} answered ${res.status}: ${text.slice(0, 300)}`);
      return elapsed;
    }
    async function timedSql(sql: string, values: unknown[], rows: number): Promise<number> {
      const t = performance.now();
      const r = await floorDb.query(sql, values);
      const elapsed = performance.now() - t;
      if (r.rows.length !== rows) throw new Error(`the floor read ${r.rows.length} rows, not ${rows}`);
      return elapsed;
    }

    const results: Array<{ size: number; page: number[]; feed: number[]; pageFloor: number[]; feedFloor: number[] }> = [];
    let stored = PROBE;
    for (const size of SIZES) {
      const seedStart = performance.now();
      for (let from = stored; from < size; from += 100_000) {
        const to = Math.min(size, from + 100_000);
        const values = [fillers.map((f) => f.id), fillers.map((f) => f.user_id), BIG_TENANT, blob, from, to - 1];
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
      stored = Math.max(stored, size);
      await db.query('VACUUM ANALYZE records, record_changes');
      await db.query('CHECKPOINT');
      const [{ n }] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM records`)).rows;
      console.log(`${n.toLocaleString('en')} records stored (seeded in ${((performance.now() - seedStart) / 1000).toFixed(1)} s)`);
      const r = { size: n, page: [] as number[], feed: [] as number[], pageFloor: [] as number[], feedFloor: [] as number[] };
      const at = () => Math.floor(Math.random() * (PROBE - PAGE));
      const pageOk = (b: { items: unknown[] }) => b.items.length === PAGE;
      for (let i = 0; i < Math.min(300, READS); i++) {
        await timedGet(pageUrl(at()), pageOk);
        await timedGet(feedUrl(at()), pageOk);
        await timedSql(PAGE_SQL, [BIG_TENANT, PROBE_USER, probeIds[at()]], PAGE + 1);
        await timedSql(FEED_SQL, [BIG_TENANT, probeXid, firstSeq + at()], PAGE);
      }
      for (let i = 0; i < READS; i++) {
        r.page.push(await timedGet(pageUrl(at()), pageOk));
        r.feed.push(await timedGet(feedUrl(at()), pageOk));
        r.pageFloor.push(await timedSql(PAGE_SQL, [BIG_TENANT, PROBE_USER, probeIds[at()]], PAGE + 1));
        r.feedFloor.push(await timedSql(FEED_SQL, [BIG_TENANT, probeXid, firstSeq + at()], PAGE));
      }
      results.push(r);
      console.log(
        `  page p50 ${ms(median(r.page))} p99 ${ms(p99(r.page))} ms (floor p50 ${ms(median(r.pageFloor))} p99 ${ms(p99(r.pageFloor))});` +
          ` feed page p50 ${ms(median(r.feed))} p99 ${ms(p99(r.feed))} ms (floor p50 ${ms(median(r.feedFloor))} p99 ${ms(p99(r.feedFloor))})`,
      );
    }
    for (const [name, sql, values] of [
      ['page', PAGE_SQL, [BIG_TENANT, PROBE_USER, probeIds[450]]],
      ['feed', FEED_SQL, [BIG_TENANT, probeXid, firstSeq + 450]],
    ] as const) {
      const plan = await floorDb.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${sql}`, [...values]);
      console.log(
        `  plan of the ${name} at the largest size: ${plan.rows
          .map((p) => p['QUERY PLAN'].trim())
          .filter((l) => /Index|Buffers|Execution/.test(l))
          .join(' | ')}`,
      );
    }
    const [first, last] = [results[0], results[results.length - 1]];
    for (const kind of ['page', 'feed'] as const) {
      const floorKind = kind === 'page' ? 'pageFloor' : 'feedFloor';
      console.log(
        `${kind}: ${last.size.toLocaleString('en')}/${first.size.toLocaleString('en')} records: p50 ${(median(last[kind]) / median(first[kind])).toFixed(2)}x, ` +
          `p99 ${(p99(last[kind]) / p99(first[kind])).toFixed(2)}x (floor p50 ${(median(last[floorKind]) / median(first[floorKind])).toFixed(2)}x, ` +
          `p99 ${(p99(last[floorKind]) / p99(first[floorKind])).toFixed(2)}x); service/floor p50 at the largest ${(median(last[kind]) / median(last[floorKind])).toFixed(1)}x` +
          (kind === 'page' ? `; goal flat within 1.1x, p99 <= 5 ms: p99 ${ms(p99(last.page))} ms` : '; goal flat within 1.1x'),
      );
    }
    await floorDb.end();

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

    // 4. A person's p95 with sync's share in use.
    const shareKey = await syncedTenant('share', 'alice', SHARE_USERS);
    const patched = await fetch(`${app.url}/v1/tenants/share`, {
      method: 'PATCH',
      headers: op,
      body: JSON.stringify({ quotas: { read: '400/60s' } }),
    });
    if (patched.status !== 200) throw new Error(`PATCH quotas answered ${patched.status}`);
    async function person(seconds: number): Promise<number[]> {
      const out: number[] = [];
      const end = Date.now() + seconds * 1000;
      for (let next = Date.now(); next < end; next += 200) {
        await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
        const t = performance.now();
        const res = await fetch(`${app.url}/v1/tenants/share/workflows?step=Review`, {
          headers: { authorization: `Bearer ${shareKey}`, 'x-user-id': 'u-0' },
        });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`a person's call answered ${res.status}`);
        out.push(performance.now() - t);
      }
      return out;
    }
    await person(2); // warm-up
    const idle = await person(SHARE_SECONDS);
    const callsBefore = await stats();
    await setSync('share', true);
    await syncNow('share');
    const busy = await person(SHARE_SECONDS);
    const syncCalls = (await stats()) - callsBefore - busy.length;
    console.log(
      `a person's GET /workflows, 400 reads/60 s, ${SHARE_USERS} synced users: p95 idle ${ms(pct(idle, 0.95))} ms, while syncing ${ms(pct(busy, 0.95))} ms: ` +
        `${(pct(busy, 0.95) / pct(idle, 0.95)).toFixed(2)}x (goal <= 1.1x); sync's calls meanwhile ${syncCalls} (share: ${Math.floor(400 * 0.25)} a minute)`,
    );
  } finally {
    await stopApp();
    await scratch.drop();
    sandbox.proc.kill('SIGTERM');
  }
}

finish(main());
