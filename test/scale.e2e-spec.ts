import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DataSource, type QueryRunner } from 'typeorm';
import { BIG_TENANT, seedAudit, seedConnections, seedEvents, seedTenants } from '../bench/scale-seed.js';
import { AuditLogRepository } from '../src/audit/audit-log.repository.js';
import { ConnectionEntity } from '../src/connections/store/connection.entity.js';
import { ConnectionsRepository } from '../src/connections/store/connections.repository.js';
import {
  CLAIM_DUE_SQL,
  COUNT_DUE_SQL,
  RELEASE_LEASES_OF_SQL,
  RenewalLeaseRepository,
} from '../src/connections/store/renewal-lease.repository.js';
import { RenewalSaveRepository } from '../src/connections/store/renewal-save.repository.js';
import { EventsRepository } from '../src/events/events.repository.js';
import { MAX_OWNERS, ownerKey, RouteCache } from '../src/routing/route-cache.js';
import { RoutingService } from '../src/routing/routing.service.js';
import { TenantsRepository } from '../src/tenants/tenants.repository.js';
import { startTestApp, testVaultKey, type TestApp } from './support/test-app.js';

/**
 * The shape of the service's reads at 100,000 connections over 10,000 tenants (bench/scale.ts measures the
 * figures): every statement that serves a request or the scheduler reads through an index and a bounded
 * number of rows, whatever the table holds, and the route cache stays within its bound. No timing here.
 */
const VAULT_KEYS = testVaultKey('scale');
const CONNECTIONS = 100_000;
const TENANTS = 10_000;
const EVENTS = 100_000;
const AUDIT_ROWS = 100_000;

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** A value as an SQL literal, for EXECUTE's arguments (the types the statements here take). */
function literal(escape: (text: string) => string, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (value instanceof Date) return escape(value.toISOString());
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return escape(String(value));
  if (Array.isArray(value))
    return escape(`{${value.map((v) => (v === null ? 'NULL' : `"${String(v).replace(/["\\]/g, '\\$&')}"`)).join(',')}}`);
  throw new Error(`no literal for ${typeof value}`);
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** A scan of `table`, or of one of its partitions (`<table>_…`: the events tables are partitioned by day). */
function scans(plan: PlanNode, table: string): PlanNode[] {
  return nodes(plan).filter((n) => n['Relation Name'] === table || n['Relation Name']?.startsWith(`${table}_`));
}

/** Rows a plan read from a table: what its scans returned plus what their filters threw away. */
function rowsRead(plan: PlanNode, table: string): number {
  return scans(plan, table).reduce(
    (sum, n) => sum + ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0)) * (n['Actual Loops'] ?? 1),
    0,
  );
}

describe('at 100k connections and 10k tenants: indexes, bounded reads, bounded caches', () => {
  let t: TestApp;
  let ds: DataSource;
  /** The statements TypeORM sends while `work` runs, with their parameters (the exact SQL the service runs). */
  let capture: <T>(work: () => Promise<T>) => Promise<Array<{ sql: string; params: unknown[] }>>;

  /**
   * The plan of a statement, as PostgreSQL runs it (EXPLAIN ANALYZE, rolled back: a claim leases nothing). Generic:
   * the plan of the statement prepared without its values (PREPARE, then EXECUTE with plan_cache_mode
   * force_generic_plan), the one a named prepared statement keeps and reuses; an EXPLAIN sent with parameters would
   * be planned with their values.
   */
  const explain = async (sql: string, params: unknown[], generic = false): Promise<PlanNode> => {
    const client = await t.db.connect();
    try {
      await client.query('BEGIN');
      let r;
      if (generic) {
        await client.query(`SET LOCAL plan_cache_mode = force_generic_plan`);
        await client.query(`PREPARE scale_explain AS ${sql}`);
        r = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE scale_explain(${params.map((p) => literal(client.escapeLiteral.bind(client), p)).join(', ')})`,
        );
      } else {
        r = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
      }
      return r.rows[0]['QUERY PLAN'][0].Plan;
    } finally {
      await client.query('ROLLBACK');
      await client.query('DEALLOCATE ALL');
      client.release();
    }
  };
  const expectIndexed = (plan: PlanNode, table: string) => {
    const found = scans(plan, table);
    expect(found.length).toBeGreaterThan(0);
    for (const scan of found) expect(scan['Node Type']).not.toBe('Seq Scan');
  };
  /**
   * The plan of the statement inside the function that `sql` calls (the events page, cws_events_page), as the
   * function runs it: auto_explain's log of nested statements, sent to this client as a notice.
   */
  const explainNested = async (sql: string, params: unknown[]): Promise<PlanNode> => {
    const client = await t.db.connect();
    const plans: PlanNode[] = [];
    const onNotice = (n: { message?: string }) => {
      const json = /plan:\n([\s\S]*)$/.exec(n.message ?? '')?.[1];
      if (json) plans.push((JSON.parse(json) as { Plan: PlanNode }).Plan);
    };
    client.on('notice', onNotice);
    try {
      await client.query('BEGIN');
      await client.query(`LOAD 'auto_explain'`);
      for (const setting of [
        'log_min_duration = 0',
        'log_analyze = on',
        'log_nested_statements = on',
        'log_format = json',
        'log_level = notice',
      ])
        await client.query(`SET LOCAL auto_explain.${setting}`);
      await client.query(sql, params);
      const inner = plans.find((p) => nodes(p).some((n) => n['Node Type'] !== 'Function Scan' && n['Relation Name'] !== undefined));
      expect(inner).toBeDefined();
      return inner!;
    } finally {
      client.off('notice', onNotice);
      await client.query('ROLLBACK');
      client.release();
    }
  };
  /** Only generic plans name their values as parameters ($1, ...) in their index conditions. */
  const expectGeneric = (plan: PlanNode) => {
    const conditions = nodes(plan).flatMap((n) => (n['Index Cond'] ? [n['Index Cond']] : []));
    expect(conditions.length).toBeGreaterThan(0);
    for (const c of conditions) expect(c).not.toMatch(/'/);
  };

  beforeAll(async () => {
    t = await startTestApp({ env: { VAULT_KEYS, REFRESH_SCHEDULER: 'off' } });
    ds = t.app.get(DataSource);
    const client = await t.db.connect();
    try {
      await seedTenants(client, VAULT_KEYS, TENANTS);
      await seedConnections(client, VAULT_KEYS, {
        tenants: TENANTS,
        connections: CONNECTIONS,
        accessToken: 'scale-access-token',
        accessExpiresAt: new Date(Date.now() + 3_600_000),
      });
      await seedEvents(client, TENANTS, EVENTS, '{"event":"workflow_step_updated"}');
      await seedAudit(client, TENANTS, AUDIT_ROWS);
      await client.query('ANALYZE');
    } finally {
      client.release();
    }
    capture = async (work) => {
      const seen: Array<{ sql: string; params: unknown[] }> = [];
      // The named prepared statements go to TypeORM's pg pool directly (src/database/pg-pool.ts).
      const pool = (ds.driver as unknown as { master: { query: (q: unknown, values?: unknown) => Promise<unknown> } }).master;
      const poolQuery = pool.query;
      pool.query = (q: unknown, values?: unknown) => {
        if (typeof q === 'object' && q !== null) {
          const config = q as { text: string; values?: unknown[] };
          seen.push({ sql: config.text, params: config.values ?? [] });
        }
        return poolQuery.call(pool, q, values);
      };
      const create = ds.createQueryRunner.bind(ds);
      ds.createQueryRunner = (...args: Parameters<DataSource['createQueryRunner']>): QueryRunner => {
        const runner = create(...args);
        const query = runner.query.bind(runner);
        runner.query = ((sql: string, params?: unknown[], ...rest: unknown[]) => {
          seen.push({ sql, params: params ?? [] });
          return (query as (...a: unknown[]) => Promise<unknown>)(sql, params, ...rest);
        }) as QueryRunner['query'];
        return runner;
      };
      try {
        await work();
      } finally {
        ds.createQueryRunner = create;
        pool.query = poolQuery;
      }
      return seen.filter((s) => /^\s*(SELECT|UPDATE|INSERT|WITH)/i.test(s.sql));
    };
  }, 170_000);
  afterAll(async () => {
    await t?.close();
  });

  it("the scheduler's claim reads the due index, in its generic plan too, and leases a batch without reading the table", async () => {
    // A batch's worth of connections due now.
    await t.db.query(
      `UPDATE connections SET refresh_due_at = now() - interval '1 minute' WHERE id IN (SELECT id FROM connections WHERE status = 'active' ORDER BY id LIMIT 250)`,
    );
    for (const generic of [false, true]) {
      const plan = await explain(CLAIM_DUE_SQL, ['scale-test', 60_000, 100], generic);
      expectIndexed(plan, 'connections');
      expect(nodes(plan).some((n) => n['Index Name'] === 'ix_connections_refresh_due')).toBe(true);
      // The update reaches the locked rows by tuple id: no second descent of an index per row.
      expect(nodes(plan).some((n) => n['Node Type'] === 'Tid Scan' && n['Relation Name'] === 'connections')).toBe(true);
      expect(nodes(plan).some((n) => n['Index Name'] === 'connections_pkey')).toBe(false);
      expect(rowsRead(plan, 'connections')).toBeLessThanOrEqual(400);
    }
    // The tick's count of the backlog reads the due index as far as the concurrency cap, in its generic plan too.
    for (const generic of [false, true]) {
      const plan = await explain(COUNT_DUE_SQL, [8], generic);
      expectIndexed(plan, 'connections');
      expect(nodes(plan).some((n) => n['Index Name'] === 'ix_connections_refresh_due')).toBe(true);
      expect(rowsRead(plan, 'connections')).toBeLessThanOrEqual(8);
    }
  });

  it("a drain's release of its leases reads the due index and the rows due now, not the table", async () => {
    // Leases an instance holds at its drain: on connections it claimed, which were due.
    await t.db.query(
      `UPDATE connections SET refresh_due_at = now() - interval '1 minute', lease_owner = 'scale-drain', lease_until = now() + interval '1 minute'
        WHERE id IN (SELECT id FROM connections WHERE status = 'active' ORDER BY id DESC LIMIT 50)`,
    );
    const plan = await explain(RELEASE_LEASES_OF_SQL, ['scale-drain']);
    expectIndexed(plan, 'connections');
    expect(nodes(plan).some((n) => n['Index Name'] === 'ix_connections_refresh_due')).toBe(true);
    expect(rowsRead(plan, 'connections')).toBeLessThanOrEqual(400);
    // The 50 leases, each found once by the index scan (the update's own node names the table too).
    const found = scans(plan, 'connections').filter((n) => n['Node Type'].endsWith('Scan'));
    expect(found.reduce((n, scan) => n + (scan['Actual Rows'] ?? 0) * (scan['Actual Loops'] ?? 1), 0)).toBe(50);
    await t.db.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = 'scale-drain'`);
  });

  it("the facade's token lookup (the owner's connection) reads one row through the tenant's user index", async () => {
    const repo = t.app.get(ConnectionsRepository);
    const [lookup] = await capture(() => repo.findUser(BIG_TENANT, 'u-20000'));
    expect(lookup.sql).toMatch(/FROM "?connections"?/);
    for (const generic of [false, true]) {
      const plan = await explain(lookup.sql, lookup.params, generic);
      expectIndexed(plan, 'connections');
      expect(rowsRead(plan, 'connections')).toBe(1);
    }
  });

  it('every list page of a big tenant, first and deep, with each filter, reads an index and about one page of rows', async () => {
    const repo = t.app.get(ConnectionsRepository);
    const deep = (
      await t.db.query<{ at: string; id: string }>(
        `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, id::text FROM connections
          WHERE tenant_id = $1 ORDER BY created_at, id OFFSET 40000 LIMIT 1`,
        [BIG_TENANT],
      )
    ).rows[0];
    const filters = [
      {},
      { userId: 'u-777' },
      { kind: 'user' as const },
      { kind: 'admin' as const },
      { status: 'reauth_required' as const },
      { status: 'active' as const },
    ];
    for (const filter of filters) {
      for (const after of [null, { createdAt: deep.at, id: deep.id }]) {
        const statements = await capture(() => repo.listPage(BIG_TENANT, filter, after, 100));
        const page = statements.find((s) => /FROM "?connections"?/.test(s.sql));
        expect(page).toBeDefined();
        // The page is a named prepared statement: its generic plan, which PostgreSQL keeps, must be as good.
        for (const generic of [false, true]) {
          const plan = await explain(page!.sql, page!.params, generic);
          expectIndexed(plan, 'connections');
          // One page (101 rows), and for a rare status the rows the partial index skips: never the tenant's 50,000.
          expect(rowsRead(plan, 'connections')).toBeLessThanOrEqual(500);
        }
      }
    }
  });

  it("the console's tenants page reads one page of tenants through the index, and answers at most its limit", async () => {
    const res = await t.request<Array<{ id: string }>>('GET', '/v1/tenants?limit=100');
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(100);
    const next = await t.request<Array<{ id: string }>>('GET', `/v1/tenants?limit=100&after=${res.body[99].id}`);
    expect(next.body[0].id).not.toBe(res.body[99].id);
    expect(new Set([...res.body, ...next.body].map((x) => x.id)).size).toBe(200);
    const repo = t.app.get(TenantsRepository);
    for (const after of [null, res.body[99].id]) {
      const [page] = await capture(() => repo.listPage(100, after));
      for (const generic of [false, true]) {
        const plan = await explain(page.sql, page.params, generic);
        expectIndexed(plan, 'tenants');
        expect(rowsRead(plan, 'tenants')).toBeLessThanOrEqual(102);
      }
    }
    const bad = await t.request<{ error: { code: string } }>('GET', '/v1/tenants?limit=0');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
  });

  it("the console's connections and deliveries pages answer one page, read through indexes", async () => {
    const connections = await t.request<{ connections: unknown[] }>('GET', `/v1/tenants/${BIG_TENANT}/connections?limit=50`);
    expect(connections.status).toBe(200);
    expect(connections.body.connections).toHaveLength(50);
    const events = await t.request<{ events: unknown[] }>('GET', `/v1/tenants/${BIG_TENANT}/events?limit=50`);
    expect(events.status).toBe(200);
    expect(events.body.events).toHaveLength(50);
    // The page is the function cws_events_page, which plans it once per connection (a generic plan).
    const [page] = await capture(() => t.app.get(EventsRepository).listAfter(BIG_TENANT, { writerXid: '0', seq: 0 }, 50, new Date(0)));
    const plan = await explainNested(page.sql, page.params);
    expectIndexed(plan, 'events');
    expectGeneric(plan);
    expect(rowsRead(plan, 'events')).toBeLessThanOrEqual(200);
  });

  it('the audit pages, of a tenant and of every tenant, first and deep, read about one page through an index in either plan', async () => {
    const repo = t.app.get(AuditLogRepository);
    const deep = (
      await t.db.query<{ at: string; id: string }>(
        `SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, id::text FROM audit_log
          WHERE tenant_id = $1 ORDER BY at DESC, id DESC OFFSET 40000 LIMIT 1`,
        [BIG_TENANT],
      )
    ).rows[0];
    for (const tenantId of [BIG_TENANT, null])
      for (const before of [null, deep]) {
        const [page] = await capture(() => repo.listPage(tenantId, before, 100));
        for (const generic of [false, true]) {
          const plan = await explain(page.sql, page.params, generic);
          expectIndexed(plan, 'audit_log');
          // About one page: the big tenant's custom plan may read every row's index (it holds half) and skip the others'.
          expect(rowsRead(plan, 'audit_log')).toBeLessThanOrEqual(500);
        }
      }
  });

  it('the lookups of a request and of a renewal read one row through an index, in their generic plans too', async () => {
    const connections = t.app.get(ConnectionsRepository);
    const tenants = t.app.get(TenantsRepository);
    const leases = t.app.get(RenewalLeaseRepository);
    const { id } = (
      await t.db.query<{ id: string }>(
        `SELECT id FROM connections WHERE tenant_id = $1 AND status = 'active' ORDER BY created_at OFFSET 30000 LIMIT 1`,
        [BIG_TENANT],
      )
    ).rows[0];
    const { version } = (await t.db.query<{ version: string }>(`SELECT version FROM connections WHERE id = $1`, [id])).rows[0];
    // Each: the work, and at most how many rows it reads of each table (an UPDATE's own node counts its row once more).
    const lookups: Array<[string, () => Promise<unknown>, Record<string, number>]> = [
      ['the admin connection', () => connections.findAdmin(BIG_TENANT), { connections: 1 }],
      ['a connection by id', () => connections.findInAnyTenant(id), { connections: 1 }],
      ["a tenant's connection by id", () => connections.findInTenant(BIG_TENANT, id), { connections: 1 }],
      ['a connection with its health', () => connections.findInTenantWithHealth(BIG_TENANT, id), { connections: 1, connection_health: 1 }],
      ['a tenant', () => tenants.findById('t04242'), { tenants: 1 }],
      ['whether a tenant exists', () => tenants.exists('t04242'), { tenants: 1 }],
      ['a lease taken', () => leases.tryLease(id, 'scale-test', 60_000), { connections: 2, tenants: 1 }],
      ['a lease extended', () => leases.extendLease(id, 'scale-test', Number(version), 60_000), { connections: 2 }],
      [
        'a failure recorded',
        () => leases.recordFailure(id, 'scale-test', Number(version), new Date(Date.now() + 60_000)),
        { connections: 2 },
      ],
      ['a lease given back', () => leases.releaseLease(id, 'scale-test'), { connections: 2 }],
    ];
    for (const [what, work, most] of lookups) {
      const [statement] = await capture(work);
      expect({ what, named: statement !== undefined }).toEqual({ what, named: true });
      for (const generic of [false, true]) {
        const plan = await explain(statement.sql, statement.params, generic);
        for (const [table, rows] of Object.entries(most)) {
          if (table !== 'connection_health') expectIndexed(plan, table);
          expect({ what, generic, table, read: rowsRead(plan, table) <= rows }).toEqual({ what, generic, table, read: true });
        }
      }
    }
    await t.db.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL, refresh_failures = 0 WHERE id = $1`, [id]);
  });

  it("renewal's save and inbound's insert reach connections and tenants by primary key, in their generic plans too", async () => {
    const rows = (
      await t.db.query<{ id: string; tenant_id: string; version: string }>(
        `SELECT id, tenant_id, version FROM connections WHERE tenant_id = $1 AND status = 'active' ORDER BY created_at OFFSET 20000 LIMIT 16`,
        [BIG_TENANT],
      )
    ).rows;
    const now = new Date();
    const items = rows.map((r) => ({
      id: r.id,
      tenantId: r.tenant_id,
      version: Number(r.version),
      accessTokenEnc: 'sealed-access',
      refreshTokenEnc: 'sealed-refresh',
      accessTokenExpiresAt: new Date(now.getTime() + 3_600_000),
      refreshDueAt: new Date(now.getTime() + 2_880_000),
      now,
      durationMs: 5,
    }));
    // Nobody holds these rows' leases: the save lands nowhere, and its plan is what is looked at.
    const [save] = await capture(() => t.app.get(RenewalSaveRepository).saveRenewedMany('scale-nobody', items));
    const deliveries = Array.from({ length: 16 }, (_, i) => ({
      id: `0190a000-0000-7000-8000-${String(i).padStart(12, '0')}`,
      tenantId: i % 2 ? BIG_TENANT : 't04242',
      source: 'upstream' as const,
      type: 'workflow_step_updated',
      payload: { event: 'workflow_step_updated' },
    }));
    const [insert] = await capture(() => t.app.get(EventsRepository).recordMany(deliveries));
    await t.db.query(`DELETE FROM events WHERE id = ANY($1::uuid[])`, [deliveries.map((d) => d.id)]);
    for (const generic of [false, true]) {
      const saved = await explain(save.sql, save.params, generic);
      expect(nodes(saved).some((n) => n['Index Name'] === 'connections_pkey')).toBe(true);
      expectIndexed(saved, 'connections');
      expect(rowsRead(saved, 'connections')).toBeLessThanOrEqual(16);
      const inserted = await explain(insert.sql, insert.params, generic);
      expectIndexed(inserted, 'tenants');
      expect(rowsRead(inserted, 'tenants')).toBeLessThanOrEqual(16);
    }
  });

  it("the events of a delivery are read by id through each partition's index, in the generic plan too", async () => {
    const { id } = (await t.db.query<{ id: string }>(`SELECT id FROM events WHERE tenant_id = $1 LIMIT 1`, [BIG_TENANT])).rows[0];
    const [statement] = await capture(() => t.app.get(EventsRepository).findInAnyTenant(id));
    for (const generic of [false, true]) {
      const plan = await explain(statement.sql, statement.params, generic);
      // A partition with rows is read through its id index; an empty one (days to come) may be scanned for nothing.
      for (const scan of scans(plan, 'events'))
        if (scan['Node Type'] === 'Seq Scan') expect((scan['Actual Rows'] ?? 0) + (scan['Rows Removed by Filter'] ?? 0)).toBe(0);
      expect(rowsRead(plan, 'events')).toBe(1);
    }
  });

  it('the route cache fills from calls and stays within its bound (and 64 MiB of heap) when more owners are touched than it holds', async () => {
    const cache = t.app.get(RouteCache);
    const routing = t.app.get(RoutingService);
    // Calls fill it: a thousand users of the big tenant, each a distinct owner.
    for (let i = 0; i < 1000; i += 50)
      await Promise.all(Array.from({ length: 50 }, (_, k) => routing.resolve(BIG_TENANT, 'user', `u-${(i + k) * 2}`)));
    expect(cache.size().owners).toBeGreaterThanOrEqual(1000);
    // Then more owners than it may hold, each with its row and token as a call stores them (without a call
    // each: the bound, not the lookup, is under test here), read a page at a time so that only the cache keeps them.
    const repo = t.app.get(DataSource).getRepository(ConnectionEntity);
    collectGarbage();
    const before = process.memoryUsage().heapUsed;
    let atBound = Number.NaN;
    let largest = 0;
    const pageSize = 5000;
    for (let skip = 0; skip < MAX_OWNERS + pageSize; skip += pageSize) {
      const rows = await repo.find({ where: { tenantId: BIG_TENANT }, order: { createdAt: 'ASC', id: 'ASC' }, skip, take: pageSize });
      for (const row of rows) {
        cache.setOwner(BIG_TENANT, ownerKey('user', row.userId), row, cache.mark());
        cache.setToken(
          BIG_TENANT,
          row.id,
          { accessToken: `scale-access-${row.id}`, version: Number(row.version), expiresAt: Date.now() + 3_600_000 },
          cache.mark(),
        );
        largest = Math.max(largest, cache.size().owners);
      }
      if (largest === MAX_OWNERS && Number.isNaN(atBound)) {
        collectGarbage();
        atBound = process.memoryUsage().heapUsed - before;
      }
    }
    expect(largest).toBe(MAX_OWNERS);
    expect(cache.size().owners).toBeLessThanOrEqual(MAX_OWNERS);
    expect(cache.size().tokens).toBeLessThanOrEqual(MAX_OWNERS + pageSize);
    // Full, the cache (owners, their rows and tokens) holds less than 64 MiB of heap.
    expect(atBound).toBeLessThan(64 * 1024 * 1024);
  }, 120_000);
});
