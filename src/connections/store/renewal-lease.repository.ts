import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../database/pg-pool.js';
import { ConnectionEntity } from './connection.entity.js';
import { queryRows, type Row } from './query-rows.js';

/**
 * The columns a renewal reads: enough to decide, call, commit and hand out a token. The scheduler claims
 * thousands of rows a second, so it does not parse the columns nobody reads (dates, scopes JSON).
 */
export type RenewalRow = Pick<
  ConnectionEntity,
  'id' | 'tenantId' | 'status' | 'version' | 'accessTokenEnc' | 'refreshTokenEnc' | 'accessTokenExpiresAt' | 'refreshFailures'
>;

/** A connection whose renewal lease this instance holds, with its tenant's environment (for the token call). */
export interface LeasedConnection {
  connection: RenewalRow;
  environment: string | null;
}

// The expiry comes back as epoch milliseconds (a float8, parsed by parseFloat): cheaper than timestamptz text.
const RENEWAL_ROW_COLUMNS = `c.id, c.tenant_id, c.status, c.version, c.access_token_enc, c.refresh_token_enc, c.refresh_failures,
        (extract(epoch FROM c.access_token_expires_at) * 1000)::float8 AS access_token_expires_ms`;
const RENEWAL_COLUMNS = `${RENEWAL_ROW_COLUMNS}, (SELECT t.environment FROM tenants t WHERE t.id = c.tenant_id) AS environment`;

/**
 * The scheduler's claim: up to $3 due connections leased to $1 for $2 ms, skipping rows another instance holds
 * (SKIP LOCKED), each with its tenant's environment.
 *
 * The update reaches each row the due scan locked by its tuple id (`ctid`, a TID scan), not by a second descent
 * of the primary key: the row is locked by this statement, so its version cannot move before the update. That
 * descent was the one per-row cost that grew with the table (a level deeper at 1M rows: 9.7 µs of backend CPU
 * per claimed row at 1k, 10.8 at 1M; by tuple id 8.5 at both, `bench/micro-claim.ts`). A row updated by another
 * transaction between the statement's snapshot and its lock is left unclaimed (the TID scan does not see the
 * new version): it stays due and a later tick takes it.
 */
export const CLAIM_DUE_SQL = `UPDATE connections c SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
         FROM (SELECT ctid, tenant_id FROM connections
                WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now())
                ORDER BY refresh_due_at
                LIMIT $3
                FOR UPDATE SKIP LOCKED) due
         JOIN tenants t ON t.id = due.tenant_id
        WHERE c.ctid = due.ctid AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING ${RENEWAL_ROW_COLUMNS}, t.environment`;

/** The due backlog, up to $1 rows: the due index's range from its start, no further. */
export const COUNT_DUE_SQL = `SELECT count(*)::int AS n FROM (
  SELECT 1 FROM connections WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now()) LIMIT $1) due`;

/**
 * A drain's release of what `$1` still holds once its renewals have settled. A lease that outlives its renewal
 * is on a claimed row, and a claim takes only due rows and leaves their due time alone until the save or the
 * failure that releases it: so the due index finds them, and the release reads the rows due now (the backlog)
 * rather than the table (lease_owner has no index of its own: one would make every claim's update a non-HOT
 * one). An on-demand renewal's lease on a row not yet due has ended by then (the drain waits for it); one whose
 * release failed lapses with its lease time.
 */
export const RELEASE_LEASES_OF_SQL = `UPDATE connections SET lease_owner = NULL, lease_until = NULL
  WHERE status = 'active' AND refresh_due_at <= now() AND lease_owner = $1 RETURNING id`;

/**
 * Renewal's lease on a connection: finding what is due, claiming it, keeping and giving the lease back, and the
 * outcomes that end it without a new pair (a failure, reauth_required). Leases and due times are compared with
 * the database's now(), so that instances with skewed clocks still agree on whose lease is live. The new pair's
 * save is renewal-save.repository.ts.
 */
@Injectable()
export class RenewalLeaseRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * How many active connections are due and not leased, counted up to `atMost` (the scheduler sizes its
   * concurrency by the backlog and never runs more than its cap: a backlog of 50,000 is read as far as the cap).
   * Prepared: every instance runs it at every tick, mostly to find nothing.
   */
  async countDue(atMost: number): Promise<number> {
    const rows = await preparedQuery<Row>(this.db, { name: 'cws_refresh_count_due', text: COUNT_DUE_SQL, values: [atMost] });
    return Number(rows[0]?.n ?? 0);
  }

  /** Takes the renewal lease of one active connection, unless another live lease holds it. */
  async tryLease(id: string, owner: string, leaseMs: number): Promise<LeasedConnection | null> {
    const rows = await this.prepared(
      'cws_refresh_try_lease',
      `UPDATE connections c SET lease_owner = $2, lease_until = now() + make_interval(secs => $3::double precision / 1000)
        WHERE c.id = $1 AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING ${RENEWAL_COLUMNS}`,
      [id, owner, leaseMs],
    );
    return rows[0] ? leased(rows[0]) : null;
  }

  /** Renews a lease this instance still holds on the same version (a claimed row that waited its turn). */
  async extendLease(id: string, owner: string, version: number, leaseMs: number): Promise<boolean> {
    const rows = await this.prepared(
      'cws_refresh_extend_lease',
      `UPDATE connections SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
        WHERE id = $1 AND lease_owner = $2 AND version = $3 AND status = 'active' RETURNING id`,
      [id, owner, version, leaseMs],
    );
    return rows.length === 1;
  }

  /**
   * Claims up to `limit` due connections for this instance: the lease is taken in the same statement that
   * finds them, and SKIP LOCKED lets every instance claim a disjoint batch without waiting on the others.
   *
   * The tenant's environment (which never changes, tenants.controller) comes from a join on tenants' primary
   * key (a lookup per row in the generic plan; PostgreSQL may memoize it per tenant), not from a subquery per
   * row, whose generic plan read the whole tenants table per row once there were a few hundred tenants.
   */
  async claimDueForRefresh(owner: string, leaseMs: number, limit: number): Promise<LeasedConnection[]> {
    // A named prepared statement, as the group save is: the scheduler's two hot statements.
    const rows = await preparedQuery<Row>(this.db, { name: 'cws_refresh_claim', text: CLAIM_DUE_SQL, values: [owner, leaseMs, limit] });
    return rows.map(leased);
  }

  /** A failed attempt that leaves the tokens as they are: count it, schedule the next try, release the lease. */
  async recordFailure(id: string, owner: string, version: number, nextDueAt: Date): Promise<boolean> {
    const rows = await this.prepared(
      'cws_refresh_record_failure',
      `UPDATE connections SET refresh_failures = refresh_failures + 1, refresh_due_at = $4, lease_owner = NULL, lease_until = NULL
        WHERE id = $1 AND version = $3 AND lease_owner = $2 RETURNING id`,
      [id, owner, version, nextDueAt],
    );
    return rows.length === 1;
  }

  /** Gives the lease back without touching anything else (nothing to do, or shutting down). */
  async releaseLease(id: string, owner: string): Promise<void> {
    await this.prepared(
      'cws_refresh_release_lease',
      `UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2`,
      [id, owner],
    );
  }

  /** Every lease `owner` still holds on a due connection, given back (a drain's last renewal step): RELEASE_LEASES_OF_SQL. */
  async releaseLeasesOf(owner: string): Promise<number> {
    const rows = await this.query(RELEASE_LEASES_OF_SQL, [owner]);
    return rows.length;
  }

  /** Gives back the leases of these rows that `owner` still holds; returns how many. */
  async releaseLeases(ids: string[], owner: string): Promise<number> {
    if (ids.length === 0) return 0;
    const rows = await this.query(
      `UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = ANY($1::uuid[]) AND lease_owner = $2 RETURNING id`,
      [ids, owner],
    );
    return rows.length;
  }

  /**
   * The upstream refused the refresh token: the connection needs its user again. The version moves too, so
   * that waiters and caches see the change. Part of the caller's transaction (the event commits with it).
   */
  async markReauthRequired(
    m: EntityManager,
    id: string,
    owner: string,
    version: number,
    reason: string,
    now: Date,
  ): Promise<ConnectionEntity | null> {
    const [rows] = (await m.query(
      `UPDATE connections SET status = 'reauth_required', status_reason = $4, refresh_due_at = NULL, version = version + 1,
              lease_owner = NULL, lease_until = NULL, updated_at = $5
        WHERE id = $1 AND version = $3 AND lease_owner = $2 AND status = 'active'
        RETURNING id`,
      [id, owner, version, reason, now],
    )) as [Row[], number];
    return rows[0] ? m.getRepository(ConnectionEntity).findOneBy({ id }) : null;
  }

  /**
   * A stored token of the connection does not open: it needs its user again, whoever holds the lease (a new
   * grant seals new tokens). Only on `version`, the row whose tokens failed: a reconnect or a renewal since
   * replaced them. Part of the caller's transaction (the event commits with it).
   */
  async markTokensUnreadable(m: EntityManager, id: string, version: number, reason: string, now: Date): Promise<ConnectionEntity | null> {
    const [rows] = (await m.query(
      `UPDATE connections SET status = 'reauth_required', status_reason = $3, refresh_due_at = NULL, version = version + 1,
              lease_owner = NULL, lease_until = NULL, updated_at = $4
        WHERE id = $1 AND version = $2 AND status = 'active'
        RETURNING id`,
      [id, version, reason, now],
    )) as [Row[], number];
    return rows[0] ? m.getRepository(ConnectionEntity).findOneBy({ id }) : null;
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

  private query(sql: string, params: unknown[]): Promise<Row[]> {
    return queryRows(this.db, sql, params);
  }

  /** A statement of every renewal (on-demand ones included): named, so that each pooled connection plans it once. */
  private prepared(name: string, text: string, values: unknown[]): Promise<Row[]> {
    return preparedQuery<Row>(this.db, { name, text, values });
  }
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
