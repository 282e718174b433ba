// bench/scale.ts's comparison of the list pages' statements as the service sends them (named prepared statements,
// planned once per connection) against the same SQL sent unnamed (planned at every call), and against the statement
// each page was before (`today`: TypeORM's query builder for the connections and tenants pages, as the code of
// 69cd9b5 built them, the audit page's SQL of then; all unnamed, as TypeORM sends them), on PostgreSQL alone:
// backend CPU per page (from /proc) and the p50 of a page's round trip, each mode on a connection of its own, the
// modes alternated round by round. The service's statements come from the repositories themselves, built on a
// TypeORM data source of the bench's own.
import pg from 'pg';
import { DataSource } from 'typeorm';
import { AuditLogRepository } from '../src/audit/audit-log.repository.js';
import { SystemClock } from '../src/common/clock.js';
import { ConnectionEntity } from '../src/connections/store/connection.entity.js';
import { ConnectionsRepository } from '../src/connections/store/connections.repository.js';
import type { ConnectionFilter, PagePosition } from '../src/connections/store/connection-paging.js';
import { EventsRepository } from '../src/events/events.repository.js';
import { TenantEntity } from '../src/tenants/tenant.entity.js';
import { TenantsRepository } from '../src/tenants/tenants.repository.js';
import { cpuMs, median } from './harness.js';
import { BIG_TENANT } from './scale-seed.js';

/** Rows of each measured page (the events page: the console's 50 would halve its rows; it reads 100 too). */
const PAGE_ROWS = 100;
/** Reads of each statement a round, in each mode, after 3 not counted. */
const READS = 40;
/**
 * Rows as arrays of the server's text, unparsed: a page's round trip is then PostgreSQL's time and the protocol's,
 * not the bench's own parsing of 100 rows into objects and Dates (the same in both modes, and not the database's).
 */
const RAW: Pick<pg.QueryArrayConfig, 'rowMode' | 'types'> = {
  rowMode: 'array',
  types: { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig,
};

export interface PageStatement {
  name: string;
  /** A connections page (the figure the goal is on), or another list (events, audit, tenants). */
  connections: boolean;
  prepared: pg.QueryArrayConfig;
  /** The same page as one unnamed statement (the events page: the statement its function runs, with its values). */
  unnamed: pg.QueryArrayConfig;
  /** The page's statement before the prepared statements, unnamed. */
  today: pg.QueryArrayConfig;
}

interface Mode {
  client: pg.Client;
  pid: number;
  /** Per statement: CPU µs per read of each round, and every read's round trip (ms). */
  cpu: number[][];
  ms: number[][];
}

const MODES = ['prepared', 'unnamed', 'today'] as const;

export interface StatementBench {
  statements: PageStatement[];
  prepared: Mode;
  unnamed: Mode;
  today: Mode;
  close(): Promise<void>;
}

/** The connections page as TypeORM built it before (connection-paging.ts of 69cd9b5): every column, to_char per row. */
function connectionsPageToday(ds: DataSource, filter: ConnectionFilter, after: PagePosition | null): pg.QueryConfig {
  const q = ds
    .getRepository(ConnectionEntity)
    .createQueryBuilder('c')
    .leftJoin('connection_health', 'h', 'h.connection_id = c.id')
    .addSelect('h.last_error_code', 'health_code')
    .addSelect('h.last_error_at', 'health_at')
    .addSelect(`to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, 'position_at')
    .where('c.tenant_id = :tenantId', { tenantId: BIG_TENANT });
  if (after)
    q.andWhere('(c.created_at, c.id) > (CAST(:afterAt AS timestamptz), CAST(:afterId AS uuid))', {
      afterAt: after.createdAt,
      afterId: after.id,
    });
  if (filter.userId !== undefined) q.andWhere(`c.kind = 'user' AND c.user_id = :userId`, { userId: filter.userId });
  if (filter.kind) q.andWhere('c.kind = :kind', { kind: filter.kind });
  if (filter.status) q.andWhere('c.status = :status', { status: filter.status });
  const [text, values] = q
    .orderBy('c.created_at', 'ASC')
    .addOrderBy('c.id', 'ASC')
    .limit(PAGE_ROWS + 1)
    .getQueryAndParameters();
  return { text, values };
}

/** The audit page's SQL before (first page; a tenant's, or every tenant's). */
function auditPageToday(tenantId: string | null): pg.QueryConfig {
  return {
    text: `SELECT id, at, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at, actor_kind, actor_id,
              action, tenant_id, target, user_id, request_id, outcome, count
         FROM audit_log ${tenantId === null ? '' : 'WHERE tenant_id = $1'}
        ORDER BY at DESC, id DESC
        LIMIT $${tenantId === null ? 1 : 2}`,
    values: tenantId === null ? [PAGE_ROWS + 1] : [tenantId, PAGE_ROWS + 1],
  };
}

/** The tenants page as TypeORM built it before (tenants.repository.ts of 69cd9b5). */
function tenantsPageToday(ds: DataSource, after: string | null): pg.QueryConfig {
  const q = ds.getRepository(TenantEntity).createQueryBuilder('t').where('t.deleted_at IS NULL');
  if (after !== null) q.andWhere('(t.created_at, t.id) > (SELECT a.created_at, a.id FROM tenants a WHERE a.id = :after)', { after });
  const [text, values] = q.orderBy('t.created_at', 'ASC').addOrderBy('t.id', 'ASC').limit(PAGE_ROWS).getQueryAndParameters();
  return { text, values };
}

/** The position after which a filter's page `depth` starts (the deepest full page up to 500), null when none. */
async function deepPosition(db: pg.Client, where: string, rows: number): Promise<PagePosition | null> {
  const depth = Math.min(500, Math.floor(rows / PAGE_ROWS));
  if (depth < 2) return null;
  const r = await db.query<{ at: string; id: string }>(
    `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, id::text FROM connections
      WHERE tenant_id = $1 ${where} ORDER BY created_at, id OFFSET $2 LIMIT 1`,
    [BIG_TENANT, (depth - 1) * PAGE_ROWS - 1],
  );
  return r.rows[0] ? { createdAt: r.rows[0].at, id: r.rows[0].id } : null;
}

/** The events page's function body as one statement, its arguments as parameters $1..$5. */
async function eventsPageStatement(db: pg.Client): Promise<string> {
  const src = (await db.query<{ src: string }>(`SELECT prosrc AS src FROM pg_proc WHERE proname = 'cws_events_page'`)).rows[0].src;
  const body = /RETURN QUERY([\s\S]*);\s*END/.exec(src)?.[1];
  if (!body) throw new Error('cws_events_page: no RETURN QUERY');
  const params: Record<string, string> = {
    p_tenant: '$1::text',
    p_writer: '$2::xid8',
    p_seq: '$3::bigint',
    p_limit: '$4::integer',
    p_kept: '$5::timestamptz',
  };
  return body.replace(/\bp_(tenant|writer|seq|limit|kept)\b/g, (p) => params[p]);
}

async function mode(url: string, name: string, statements: number): Promise<Mode> {
  const client = new pg.Client({ connectionString: url, application_name: `cws-bench ${name}` });
  await client.connect();
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  return { client, pid, cpu: Array.from({ length: statements }, () => []), ms: Array.from({ length: statements }, () => []) };
}

/** The list pages of a seeded size's big tenant (`bigCount` connections), each as the service sends it and unnamed. */
export async function statementBench(url: string, db: pg.Client, bigCount: number): Promise<StatementBench> {
  const ds = new DataSource({ type: 'postgres', url, entities: [ConnectionEntity, TenantEntity], extra: { max: 1 } });
  await ds.initialize();
  const statements: PageStatement[] = [];
  const add = (name: string, connections: boolean, prepared: pg.QueryConfig, today: pg.QueryConfig, unnamedText = prepared.text) =>
    statements.push({
      name,
      connections,
      prepared: { ...prepared, ...RAW },
      unnamed: { text: unnamedText, values: prepared.values, ...RAW },
      today: { text: today.text, values: today.values, ...RAW },
    });
  try {
    const connections = new ConnectionsRepository(ds);
    const filters: Array<[string, ConnectionFilter, string, number]> = [
      ['no filter', {}, '', bigCount],
      ['userId', { userId: `u-${Math.floor(bigCount / 2)}` }, '', 0],
      ['kind=user', { kind: 'user' }, `AND kind = 'user'`, bigCount],
      ['status=reauth_required', { status: 'reauth_required' }, `AND status = 'reauth_required'`, Math.floor(bigCount / 4)],
    ];
    for (const [label, filter, where, rows] of filters) {
      add(
        `connections page 1 (${label})`,
        true,
        connections.pages.query(BIG_TENANT, filter, null, PAGE_ROWS),
        connectionsPageToday(ds, filter, null),
      );
      const deep = await deepPosition(db, where, rows);
      if (deep)
        add(
          `connections deep page (${label})`,
          true,
          connections.pages.query(BIG_TENANT, filter, deep, PAGE_ROWS),
          connectionsPageToday(ds, filter, deep),
        );
    }
    const events = new EventsRepository(ds, new SystemClock());
    const page = events.listAfterQuery(BIG_TENANT, { writerXid: '0', seq: 0 }, PAGE_ROWS, new Date(Date.now() - 30 * 86_400_000));
    const eventsToday = await eventsPageStatement(db);
    add('events page 1', false, page, { text: eventsToday, values: page.values }, eventsToday);
    const audit = new AuditLogRepository(ds);
    add("audit page 1 (the tenant's)", false, audit.pageQuery(BIG_TENANT, null, PAGE_ROWS), auditPageToday(BIG_TENANT));
    add('audit page 1 (every tenant)', false, audit.pageQuery(null, null, PAGE_ROWS), auditPageToday(null));
    const tenants = new TenantsRepository(ds.getRepository(TenantEntity), ds);
    add('tenants page 1', false, tenants.pageQuery(PAGE_ROWS, null), tenantsPageToday(ds, null));
    add('tenants page 2', false, tenants.pageQuery(PAGE_ROWS, 't00099'), tenantsPageToday(ds, 't00099'));
  } finally {
    await ds.destroy();
  }
  const prepared = await mode(url, 'prepared', statements.length);
  const unnamed = await mode(url, 'unnamed', statements.length);
  const today = await mode(url, 'today', statements.length);
  return {
    statements,
    prepared,
    unnamed,
    today,
    async close() {
      for (const m of [prepared, unnamed, today]) await m.client.end().catch(() => undefined);
    },
  };
}

/** One round: every statement READS times in each mode, the modes' order reversed every other round. */
export async function statementRound(b: StatementBench, round: number): Promise<void> {
  for (const which of round % 2 ? [...MODES].reverse() : MODES) {
    const m = b[which];
    for (const [i, s] of b.statements.entries()) {
      const q = s[which];
      for (let k = 0; k < 3; k++) await m.client.query(q);
      const before = cpuMs(m.pid);
      for (let k = 0; k < READS; k++) {
        const t = performance.now();
        await m.client.query(q);
        m.ms[i].push(performance.now() - t);
      }
      m.cpu[i].push(((cpuMs(m.pid) - before) * 1000) / READS);
    }
  }
}

/** Sums over a group of pages, in each mode: CPU µs, p50 ms. */
export interface PageSums {
  cpu: Record<(typeof MODES)[number], number>;
  p50: Record<(typeof MODES)[number], number>;
}

export interface StatementFigures {
  /** Summed over the connections pages (one page of each kind), and over the others. */
  connections: PageSums;
  others: PageSums;
  lines: string[];
}

/** Each statement's medians in each mode, the ratios to today's, and which plans PostgreSQL kept for the named ones. */
export async function statementFigures(b: StatementBench): Promise<StatementFigures> {
  const plans = new Map(
    (
      await b.prepared.client.query<{ name: string; generic: string; custom: string }>(
        'SELECT name, generic_plans AS generic, custom_plans AS custom FROM pg_prepared_statements',
      )
    ).rows.map((r) => [r.name, `${r.generic} generic, ${r.custom} custom`]),
  );
  const zero = () => ({ prepared: 0, unnamed: 0, today: 0 });
  const sums = { connections: { cpu: zero(), p50: zero() }, others: { cpu: zero(), p50: zero() } };
  const lines = b.statements.map((s, i) => {
    const into = s.connections ? sums.connections : sums.others;
    const cpu = zero();
    const p50 = zero();
    for (const m of MODES) {
      cpu[m] = median(b[m].cpu[i]);
      p50[m] = median(b[m].ms[i]);
      into.cpu[m] += cpu[m];
      into.p50[m] += p50[m];
    }
    return (
      `    ${s.name}: CPU ${cpu.prepared.toFixed(0)} / ${cpu.unnamed.toFixed(0)} / ${cpu.today.toFixed(0)} µs (${(cpu.prepared / cpu.today).toFixed(2)}), ` +
      `p50 ${p50.prepared.toFixed(2)} / ${p50.unnamed.toFixed(2)} / ${p50.today.toFixed(2)} ms (${(p50.prepared / p50.today).toFixed(2)}); ` +
      `${s.prepared.name}: ${plans.get(s.prepared.name ?? '') ?? '?'}`
    );
  });
  return { ...sums, lines };
}
