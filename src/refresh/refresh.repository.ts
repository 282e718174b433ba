import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { ConnectionEntity } from '../connections/connection.entity.js';

/** The new token pair of a renewal, sealed, with the timing that follows from its expiresIn. */
export interface RenewedFields {
  accessTokenEnc: string;
  refreshTokenEnc: string;
  accessTokenExpiresAt: Date;
  refreshDueAt: Date;
  now: Date;
}

/**
 * The columns a renewal reads: enough to decide, call, commit and hand out a token. The scheduler claims
 * thousands of rows a second, and parsing the columns nobody reads (dates, scopes JSON) was a measurable
 * share of its CPU.
 */
export type RenewalRow = Pick<ConnectionEntity, 'id' | 'tenantId' | 'status' | 'version' | 'accessTokenEnc' | 'refreshTokenEnc' | 'accessTokenExpiresAt' | 'refreshFailures'>;

/** A connection whose renewal lease this instance holds, with its tenant's environment (for the token call). */
export interface LeasedConnection {
  connection: RenewalRow;
  environment: string | null;
}

/** A renewed pair to save, with the version and lease it was renewed under. */
export type RenewedItem = RenewedFields & { id: string; tenantId: string; version: number };

/** Ids per notification, as the change trigger sends them (NOTIFY payloads stay under 8,000 bytes). */
const IDS_PER_NOTIFICATION = 100;

// The expiry comes back as epoch milliseconds (a float8, parsed by parseFloat) rather than as timestamptz text,
// whose parser cost more than the rest of the row.
const RENEWAL_COLUMNS = `c.id, c.tenant_id, c.status, c.version, c.access_token_enc, c.refresh_token_enc, c.refresh_failures,
        (extract(epoch FROM c.access_token_expires_at) * 1000)::float8 AS access_token_expires_ms,
        (SELECT t.environment FROM tenants t WHERE t.id = c.tenant_id) AS environment`;

type Row = Record<string, unknown>;

/**
 * A database connection reserved for one renewal's commit before its token call starts, so that once the
 * upstream has rotated the pair, nothing stands between the answer and its COMMIT: no wait for a pooled
 * connection behind API traffic, no group commit to join. Released (or dropped, when it broke) afterwards.
 */
export interface CommitLane {
  save(owner: string, item: RenewedItem): Promise<boolean>;
  release(broken?: boolean): void;
}

/** Lanes beyond REFRESH_CONCURRENCY, for on-demand renewals (a caller whose token expired, a 401, a forced renewal). */
const ON_DEMAND_LANES = 4;

const SAVE_RENEWED_SQL = `UPDATE connections c SET access_token_enc = v.at, refresh_token_enc = v.rt, access_token_expires_at = to_timestamp(v.exp_ms / 1000),
        refresh_due_at = to_timestamp(v.due_ms / 1000), last_refreshed_at = to_timestamp(v.now_ms / 1000), refresh_failures = 0,
        version = c.version + 1, lease_owner = NULL, lease_until = NULL, updated_at = to_timestamp(v.now_ms / 1000)
   FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::float8[], $7::float8[], $8::float8[]) AS v(id, version, at, rt, exp_ms, due_ms, now_ms)
  WHERE c.id = v.id AND c.version = v.version AND c.lease_owner = $1
  RETURNING c.id`;

/**
 * All SQL of renewal. Leases and due times are compared with the database's now(), so that instances
 * with skewed clocks still agree on whose lease is live.
 */
@Injectable()
export class RefreshRepository implements OnApplicationShutdown {
  private lanes: pg.Pool | null = null;
  private readonly toAnnounce: Array<{ tenantId: string; id: string }> = [];
  private announcing = false;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    const lanes = this.lanes;
    this.lanes = null;
    await lanes?.end().catch(() => undefined);
  }

  /**
   * Reserves a commit lane: a connection of renewal's own small pool (REFRESH_CONCURRENCY + 4 at most,
   * opened on first use, closed after 10 s idle). Waiting for one happens before the token call, where it
   * costs nothing but time.
   */
  async reserveCommitLane(): Promise<CommitLane> {
    if (!this.lanes) {
      const pool = new pg.Pool({
        connectionString: this.config.databaseUrl ?? undefined,
        max: this.config.refresh.concurrency + ON_DEMAND_LANES,
        idleTimeoutMillis: 10_000,
        connectionTimeoutMillis: 5000,
        application_name: `cws-connect ${this.config.instanceId} renewal`,
        // The change trigger stays silent on these sessions: a NOTIFY would serialize the commits
        // (migration DeferredRenewalNotify); announceRenewed sends the notifications instead.
        options: '-c cws.defer_change_notify=on',
      });
      // An idle lane dropped by the server (a restart) is discarded by the pool; nothing to do here.
      pool.on('error', () => undefined);
      this.lanes = pool;
    }
    const client = await this.lanes.connect();
    let released = false;
    return {
      save: async (owner, item) => {
        const saved = (await runSave((q) => client.query<Row>(q), owner, [item])).has(item.id);
        if (saved) this.announceRenewed(item.tenantId, item.id);
        return saved;
      },
      release: (broken = false) => {
        if (released) return;
        released = true;
        client.release(broken);
      },
    };
  }

  /**
   * Tells the other instances' caches (src/changes) that a connection saved on a commit lane changed, as the
   * trigger would have: `connections:<tenant>:<id>,...`. Ids committed while one announcement is being sent
   * go together in the next. Best effort: a cache that misses it serves the previous token, which the
   * upstream answers with 401, and routing renews on 401 by version (docs/renewal.md).
   */
  private announceRenewed(tenantId: string, id: string): void {
    this.toAnnounce.push({ tenantId, id });
    if (this.announcing) return;
    this.announcing = true;
    void (async () => {
      try {
        while (this.toAnnounce.length > 0) {
          const batch = this.toAnnounce.splice(0, 1000);
          const byTenant = new Map<string, string[]>();
          for (const c of batch) byTenant.set(c.tenantId, [...(byTenant.get(c.tenantId) ?? []), c.id]);
          const messages: string[] = [];
          for (const [tenant, ids] of byTenant) {
            for (let i = 0; i < ids.length; i += IDS_PER_NOTIFICATION) messages.push(`connections:${tenant}:${ids.slice(i, i + IDS_PER_NOTIFICATION).join(',')}`);
          }
          await this.query(`SELECT pg_notify('cws_changes', m) FROM unnest($1::text[]) AS m`, [messages]).catch(() => undefined);
        }
      } finally {
        this.announcing = false;
      }
    })();
  }

  /** How many active connections are due and not leased: the backlog the scheduler sizes its concurrency by. */
  async countDue(): Promise<number> {
    const rows = await this.query(
      `SELECT count(*)::int AS n FROM connections WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now())`,
      [],
    );
    return Number(rows[0]?.n ?? 0);
  }

  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async getById(id: string): Promise<ConnectionEntity | null> {
    return one(await this.query(`SELECT * FROM connections WHERE id = $1`, [id]));
  }

  async getOwned(tenantId: string, id: string): Promise<ConnectionEntity | null> {
    return one(await this.query(`SELECT * FROM connections WHERE tenant_id = $1 AND id = $2`, [tenantId, id]));
  }

  /** Takes the renewal lease of one active connection, unless another live lease holds it. */
  async tryLease(id: string, owner: string, leaseMs: number): Promise<LeasedConnection | null> {
    const rows = await this.query(
      `UPDATE connections c SET lease_owner = $2, lease_until = now() + make_interval(secs => $3::double precision / 1000)
        WHERE c.id = $1 AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING ${RENEWAL_COLUMNS}`,
      [id, owner, leaseMs],
    );
    return rows[0] ? leased(rows[0]) : null;
  }

  /** Renews a lease this instance still holds on the same version (a claimed row that waited its turn). */
  async extendLease(id: string, owner: string, version: number, leaseMs: number): Promise<boolean> {
    const rows = await this.query(
      `UPDATE connections SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
        WHERE id = $1 AND lease_owner = $2 AND version = $3 AND status = 'active' RETURNING id`,
      [id, owner, version, leaseMs],
    );
    return rows.length === 1;
  }

  /**
   * Claims up to `limit` due connections for this instance: the lease is taken in the same statement that
   * finds them, and SKIP LOCKED lets every instance claim a disjoint batch without waiting on the others.
   */
  async claimDueForRefresh(owner: string, leaseMs: number, limit: number): Promise<LeasedConnection[]> {
    const rows = await this.prepared(
      'cws_refresh_claim',
      `UPDATE connections c SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
         FROM (SELECT id FROM connections
                WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now())
                ORDER BY refresh_due_at
                LIMIT $3
                FOR UPDATE SKIP LOCKED) due
        WHERE c.id = due.id AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING ${RENEWAL_COLUMNS}`,
      [owner, leaseMs, limit],
    );
    return rows.map(leased);
  }

  /**
   * The compare-and-swap that commits a renewal: only on the version that was renewed and only while this
   * instance still holds the lease. A new version tells every cache and every waiter that the token moved.
   * True when it landed; the caller knows every column it wrote, so nothing else comes back.
   */
  async saveRenewed(owner: string, item: RenewedItem): Promise<boolean> {
    return (await this.saveRenewedMany(owner, [item])).has(item.id);
  }

  /**
   * saveRenewed for many rows in one statement. The compare-and-swap stays per row: a row whose version moved
   * or whose lease is gone is simply not updated, and its id does not come back. Rows are sorted by id so that
   * two writers lock them in the same order (no deadlock).
   */
  async saveRenewedMany(owner: string, items: RenewedItem[]): Promise<Set<string>> {
    return runSave((q) => this.preparedQuery(q), owner, items);
  }

  /** A failed attempt that leaves the tokens as they are: count it, schedule the next try, release the lease. */
  async recordFailure(id: string, owner: string, version: number, nextDueAt: Date): Promise<boolean> {
    const rows = await this.query(
      `UPDATE connections SET refresh_failures = refresh_failures + 1, refresh_due_at = $4, lease_owner = NULL, lease_until = NULL
        WHERE id = $1 AND version = $3 AND lease_owner = $2 RETURNING id`,
      [id, owner, version, nextDueAt],
    );
    return rows.length === 1;
  }

  /** Gives the lease back without touching anything else (nothing to do, or shutting down). */
  async releaseLease(id: string, owner: string): Promise<void> {
    await this.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2`, [id, owner]);
  }

  async releaseLeases(ids: string[], owner: string): Promise<void> {
    if (ids.length === 0) return;
    await this.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = ANY($1::uuid[]) AND lease_owner = $2`, [ids, owner]);
  }

  /**
   * The upstream refused the refresh token: the connection needs its user again. The version moves too, so
   * that waiters and caches see the change. Part of the caller's transaction (the event commits with it).
   */
  async markReauthRequired(m: EntityManager, id: string, owner: string, version: number, reason: string, now: Date): Promise<ConnectionEntity | null> {
    const [rows] = (await m.query(
      `UPDATE connections SET status = 'reauth_required', status_reason = $4, refresh_due_at = NULL, version = version + 1,
              lease_owner = NULL, lease_until = NULL, updated_at = $5
        WHERE id = $1 AND version = $3 AND lease_owner = $2 AND status = 'active'
        RETURNING *`,
      [id, owner, version, reason, now],
    )) as [Row[], number];
    return rows[0] ? toConnection(rows[0]) : null;
  }

  /** Seconds since the most overdue active connection fell due (0 when none is), for the overdue gauge. */
  async oldestOverdueSeconds(): Promise<number> {
    const rows = await this.query(
      `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(refresh_due_at)), 0)::double precision AS s
         FROM connections WHERE status = 'active' AND refresh_due_at <= now()`,
      [],
    );
    return Math.max(0, Number(rows[0]?.s ?? 0));
  }

  /**
   * The scheduler's two hot statements (claim, group save) go as named prepared statements on TypeORM's
   * own pg pool: each pooled connection parses and plans them once instead of once per batch. The statement
   * log of the benchmark showed parse + plan at about 0.4 ms per save, a quarter of PostgreSQL's CPU per
   * renewal. (Behind PgBouncer this needs session pooling, or 1.21+ with max_prepared_statements.)
   */
  private async prepared(name: string, sql: string, params: unknown[]): Promise<Row[]> {
    return (await this.preparedQuery({ name, text: sql, values: params })).rows;
  }

  private async preparedQuery(q: pg.QueryConfig): Promise<{ rows: Row[] }> {
    const pool = (this.db.driver as { master?: unknown }).master;
    if (!(pool instanceof pg.Pool)) return { rows: await this.query(q.text, q.values ?? []) };
    return pool.query<Row>(q);
  }

  private async query(sql: string, params: unknown[]): Promise<Row[]> {
    const result = (await this.db.query(sql, params)) as Row[] | [Row[], number];
    // TypeORM answers an UPDATE ... RETURNING with [rows, count] and a SELECT with rows.
    return Array.isArray(result[0]) ? (result[0] as Row[]) : (result as Row[]);
  }
}

/** The CAS save of renewed pairs, as a named prepared statement on whichever connection runs it. */
async function runSave(run: (q: pg.QueryConfig) => Promise<{ rows: Row[] }>, owner: string, items: RenewedItem[]): Promise<Set<string>> {
  const sorted = items.length > 1 ? [...items].sort((x, y) => (x.id < y.id ? -1 : 1)) : items;
  const n = sorted.length;
  const [ids, versions, ats, rts, exps, dues, nows] = [new Array<string>(n), new Array<number>(n), new Array<string>(n), new Array<string>(n), new Array<number>(n), new Array<number>(n), new Array<number>(n)];
  for (let k = 0; k < n; k++) {
    const i = sorted[k];
    ids[k] = i.id;
    versions[k] = i.version;
    ats[k] = i.accessTokenEnc;
    rts[k] = i.refreshTokenEnc;
    // Times travel as epoch milliseconds: formatting Dates as timestamptz text was a visible share of the CPU.
    exps[k] = i.accessTokenExpiresAt.getTime();
    dues[k] = i.refreshDueAt.getTime();
    nows[k] = i.now.getTime();
  }
  const { rows } = await run({ name: 'cws_refresh_save', text: SAVE_RENEWED_SQL, values: [owner, ids, versions, ats, rts, exps, dues, nows] });
  return new Set(rows.map((r) => r.id as string));
}

function leased(r: Row): LeasedConnection {
  return {
    connection: {
      id: r.id as string,
      tenantId: r.tenant_id as string,
      status: r.status as ConnectionEntity['status'],
      version: Number(r.version),
      accessTokenEnc: (r.access_token_enc as string | null) ?? null,
      refreshTokenEnc: (r.refresh_token_enc as string | null) ?? null,
      accessTokenExpiresAt: r.access_token_expires_ms === null ? null : new Date(r.access_token_expires_ms as number),
      refreshFailures: Number(r.refresh_failures),
    },
    environment: (r.environment as string | null) ?? null,
  };
}

function one(rows: Row[]): ConnectionEntity | null {
  return rows[0] ? toConnection(rows[0]) : null;
}

export function toConnection(r: Row): ConnectionEntity {
  return Object.assign(new ConnectionEntity(), {
    id: r.id as string,
    tenantId: r.tenant_id as string,
    kind: r.kind as ConnectionEntity['kind'],
    userId: (r.user_id as string | null) ?? null,
    upstreamUserId: r.upstream_user_id as string,
    upstreamEmail: (r.upstream_email as string | null) ?? null,
    upstreamUsername: (r.upstream_username as string | null) ?? null,
    isAdmin: r.is_admin as boolean,
    status: r.status as ConnectionEntity['status'],
    statusReason: (r.status_reason as string | null) ?? null,
    scopes: (r.scopes as string[]) ?? [],
    accessTokenEnc: (r.access_token_enc as string | null) ?? null,
    refreshTokenEnc: (r.refresh_token_enc as string | null) ?? null,
    accessTokenExpiresAt: (r.access_token_expires_at as Date | null) ?? null,
    refreshDueAt: (r.refresh_due_at as Date | null) ?? null,
    lastRefreshedAt: (r.last_refreshed_at as Date | null) ?? null,
    refreshFailures: Number(r.refresh_failures),
    version: Number(r.version),
    leaseOwner: (r.lease_owner as string | null) ?? null,
    leaseUntil: (r.lease_until as Date | null) ?? null,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  });
}
