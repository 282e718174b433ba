import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { CopyOwner } from './records.repository.js';

export type SyncStateName = 'initial' | 'ready' | 'failing' | 'paused';

export interface SyncState {
  connectionId: string;
  tenantId: string;
  userId: string;
  state: SyncStateName;
  records: number;
  lastListedAt: Date | null;
  lastChangeAt: Date | null;
  nextListAt: Date;
  lastError: string | null;
  failingSince: Date | null;
  failingAnnounced: boolean;
  /** How late the user's listing is, in seconds (0 when it is not due yet, or the tenant does not sync). */
  lagSeconds: number;
  /** Whether the tenant syncs now (its switch, else SYNC_WORKFLOWS): a user of a tenant that does not is `paused`. */
  syncing: boolean;
}

/** A user whose listing this instance took, until `leaseUntil`. */
export interface ClaimedSync extends CopyOwner {
  environment: string;
  /** A paged listing cut part way (a kill, a failure): its next page and when it began; null: none. */
  resume: { path: string; startedAt: Date } | null;
  state: SyncStateName;
  failingSince: Date | null;
  failingAnnounced: boolean;
}

const STATE_COLUMNS = `s.connection_id, s.tenant_id, s.user_id, s.state, s.records, s.last_listed_at, s.last_change_at, s.next_list_at,
  s.last_error, s.failing_since, s.failing_announced, COALESCE(t.sync_workflows, $1::boolean) AS syncing,
  GREATEST(0, extract(epoch FROM now() - s.next_list_at))::float8 AS lag_seconds`;

/**
 * `record_sync`: one row per synced user connection. Instances take due users with a lease (FOR UPDATE SKIP LOCKED,
 * as renewal does): a killed instance's lease runs out and another instance lists that user.
 */
@Injectable()
export class SyncStateRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** A listing's outcome and what announces it, in one transaction. */
  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** The database's clock: a listing's start, compared with the rows' times, which the database sets. */
  async databaseNow(): Promise<Date> {
    const [{ now }] = (await this.db.query(`SELECT now() AS now`)) as Array<{ now: Date }>;
    return now;
  }

  /** Adds the user connections of syncing tenants that have no row yet (due now); answers how many. */
  async enrol(defaultOn: boolean, tenantId?: string): Promise<number> {
    const [, n] = (await this.db.query(
      `INSERT INTO record_sync (connection_id, tenant_id, user_id, next_list_at)
       SELECT c.id, c.tenant_id, c.user_id, now() FROM connections c
         JOIN tenants t ON t.id = c.tenant_id AND t.deleted_at IS NULL
        WHERE c.kind = 'user' AND COALESCE(t.sync_workflows, $1::boolean) AND ($2::text IS NULL OR c.tenant_id = $2)
          AND NOT EXISTS (SELECT 1 FROM record_sync s WHERE s.connection_id = c.id)
       ON CONFLICT DO NOTHING`,
      [defaultOn, tenantId ?? null],
    )) as [unknown, number];
    return n;
  }

  /** Takes up to `limit` due users of syncing tenants for `owner`, leased for `leaseMs`. */
  async claim(
    owner: string,
    defaultOn: boolean,
    leaseMs: number,
    limit: number,
    skipTenants: readonly string[] = [],
  ): Promise<ClaimedSync[]> {
    const [rows] = (await this.db.query(
      `WITH due AS (
         SELECT s.connection_id FROM record_sync s
           JOIN tenants t ON t.id = s.tenant_id AND t.deleted_at IS NULL AND COALESCE(t.sync_workflows, $2::boolean)
          WHERE s.next_list_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now()) AND s.tenant_id <> ALL($5::text[])
          ORDER BY s.next_list_at LIMIT $4 FOR UPDATE OF s SKIP LOCKED)
       UPDATE record_sync s SET lease_owner = $1, lease_until = now() + make_interval(secs => $3::double precision / 1000)
         FROM due, tenants t WHERE s.connection_id = due.connection_id AND t.id = s.tenant_id
       RETURNING s.connection_id, s.tenant_id, s.user_id, s.state, s.failing_since, s.failing_announced, t.environment,
                 s.resume_path, s.listing_started_at`,
      [owner, defaultOn, leaseMs, limit, skipTenants],
    )) as [
      Array<{
        connection_id: string;
        tenant_id: string;
        user_id: string;
        state: SyncStateName;
        failing_since: Date | null;
        failing_announced: boolean;
        environment: string;
        resume_path: string | null;
        listing_started_at: Date | null;
      }>,
      number,
    ];
    return rows.map((r) => ({
      tenantId: r.tenant_id,
      connectionId: r.connection_id,
      userId: r.user_id,
      environment: r.environment,
      resume: r.resume_path !== null && r.listing_started_at !== null ? { path: r.resume_path, startedAt: r.listing_started_at } : null,
      state: r.state,
      failingSince: r.failing_since,
      failingAnnounced: r.failing_announced,
    }));
  }

  /** Extends this instance's lease; false when it lost it (expired and taken, or the connection is gone). */
  async extend(connectionId: string, owner: string, leaseMs: number): Promise<boolean> {
    const [, n] = (await this.db.query(
      `UPDATE record_sync SET lease_until = now() + make_interval(secs => $3::double precision / 1000), calls = calls + 1
        WHERE connection_id = $1 AND lease_owner = $2`,
      [connectionId, owner, leaseMs],
    )) as [unknown, number];
    return n > 0;
  }

  /** A complete listing: ready, with its count, listed again after `nextInMs`; false when this instance no longer holds the user. */
  async listed(
    connectionId: string,
    owner: string,
    records: number,
    changed: boolean,
    nextInMs: number,
    m?: EntityManager,
  ): Promise<boolean> {
    const [, n] = (await (m ?? this.db.manager).query(
      `UPDATE record_sync SET state = 'ready', records = $3, last_listed_at = now(),
              last_change_at = CASE WHEN $4::boolean THEN now() ELSE last_change_at END,
              next_list_at = now() + make_interval(secs => $5::double precision / 1000), last_error = NULL, failing_since = NULL,
              failing_announced = false, lease_owner = NULL, lease_until = NULL, resume_path = NULL, listing_started_at = NULL
        WHERE connection_id = $1 AND lease_owner = $2`,
      [connectionId, owner, records, changed, nextInMs],
    )) as [unknown, number];
    return n > 0;
  }

  /**
   * A listing that did not complete: nothing removed; retried after `retryInMs`. `failed`: an error of the listing
   * itself (not a budget refusal), which starts or continues the failing span; `failing`: the span passed an hour.
   */
  async unlisted(
    connectionId: string,
    owner: string,
    error: string,
    failed: boolean,
    retryInMs: number,
    failing: { state: boolean; announced: boolean },
  ): Promise<void> {
    await this.db.query(
      `UPDATE record_sync SET last_error = $3, next_list_at = now() + make_interval(secs => $5::double precision / 1000),
              failing_since = CASE WHEN $4::boolean THEN COALESCE(failing_since, now()) ELSE failing_since END,
              state = CASE WHEN $6::boolean THEN 'failing' ELSE state END,
              failing_announced = failing_announced OR $7::boolean,
              lease_owner = NULL, lease_until = NULL
        WHERE connection_id = $1 AND lease_owner = $2`,
      [connectionId, owner, error.slice(0, 500), failed, retryInMs, failing.state, failing.announced],
    );
  }

  /**
   * A page of a paged listing is written: its ids are kept (record_listing_ids) and `next` is where the listing goes on,
   * in one transaction, so an instance taking over after a kill resumes there. False when this instance lost the user.
   */
  async progress(connectionId: string, owner: string, ids: readonly string[], next: string, startedAt: Date): Promise<boolean> {
    return this.db.transaction(async (m) => {
      const [, n] = (await m.query(
        `UPDATE record_sync SET resume_path = $3, listing_started_at = $4 WHERE connection_id = $1 AND lease_owner = $2`,
        [connectionId, owner, next, startedAt],
      )) as [unknown, number];
      if (n === 0) return false;
      await m.query(
        `INSERT INTO record_listing_ids (connection_id, workflow_id) SELECT $1, id FROM unnest($2::text[]) id ON CONFLICT DO NOTHING`,
        [connectionId, ids],
      );
      return true;
    });
  }

  /** Forgets the ids of a user's listing (a new listing begins, or one completed). */
  async forgetListing(connectionId: string): Promise<void> {
    await this.db.query(`DELETE FROM record_listing_ids WHERE connection_id = $1`, [connectionId]);
  }

  /**
   * The live records of a user not seen by their paged listing (record_listing_ids) and not written since it began,
   * after `after` in id order: what a complete listing removes.
   */
  async unseen(connectionId: string, startedAt: Date, after: string, limit: number): Promise<string[]> {
    const rows = (await this.db.query(
      `SELECT r.workflow_id FROM records r
        WHERE r.connection_id = $1 AND r.deleted_at IS NULL AND r.synced_at < $2 AND r.workflow_id > $3
          AND NOT EXISTS (SELECT 1 FROM record_listing_ids s WHERE s.connection_id = r.connection_id AND s.workflow_id = r.workflow_id)
        ORDER BY r.workflow_id LIMIT $4`,
      [connectionId, startedAt, after, limit],
    )) as Array<{ workflow_id: string }>;
    return rows.map((r) => r.workflow_id);
  }

  /** A change written outside a listing (a targeted read): the user's count and last change. */
  async touched(connectionId: string, records: number): Promise<void> {
    await this.db.query(`UPDATE record_sync SET records = $2, last_change_at = now() WHERE connection_id = $1`, [connectionId, records]);
  }

  /** List now: every user of the tenant, or one. Answers how many rows were moved. */
  async listNow(tenantId: string, userId: string | undefined): Promise<number> {
    const [, n] = (await this.db.query(
      `UPDATE record_sync SET next_list_at = now() WHERE tenant_id = $1 AND ($2::text IS NULL OR user_id = $2)`,
      [tenantId, userId ?? null],
    )) as [unknown, number];
    return n;
  }

  /** Users of a tenant that sync, a page in user id order. */
  async page(
    tenantId: string,
    defaultOn: boolean,
    userId: string | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<SyncState[]> {
    const rows = (await this.db.query(
      `SELECT ${STATE_COLUMNS} FROM record_sync s JOIN tenants t ON t.id = s.tenant_id
        WHERE s.tenant_id = $2 AND ($3::text IS NULL OR s.user_id = $3) AND ($4::text IS NULL OR s.user_id > $4)
        ORDER BY s.user_id LIMIT $5`,
      [defaultOn, tenantId, userId ?? null, after ?? null, limit],
    )) as StateRow[];
    return rows.map(toState);
  }

  /** How many users of the tenant sync (the interval stretches with them). */
  async countOfTenant(tenantId: string): Promise<number> {
    const [row] = (await this.db.query(`SELECT count(*)::int AS n FROM record_sync WHERE tenant_id = $1`, [tenantId])) as Array<{
      n: number;
    }>;
    return row.n;
  }

  /** How late the oldest due listing of a syncing tenant's user is, in seconds (0 when none is due; a paused user is not late). */
  async lagSeconds(defaultOn: boolean): Promise<number> {
    const [row] = (await this.db.query(
      `SELECT COALESCE(extract(epoch FROM now() - min(s.next_list_at)), 0)::float8 AS lag FROM record_sync s
         JOIN tenants t ON t.id = s.tenant_id AND t.deleted_at IS NULL AND COALESCE(t.sync_workflows, $1::boolean)
        WHERE s.next_list_at <= now()`,
      [defaultOn],
    )) as Array<{ lag: number }>;
    return Math.max(0, Number(row.lag));
  }

  /** Hands back every lease of this instance (a drain). */
  async release(owner: string): Promise<void> {
    await this.db.query(`UPDATE record_sync SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1`, [owner]);
  }
}

interface StateRow {
  connection_id: string;
  tenant_id: string;
  user_id: string;
  state: SyncStateName;
  records: number;
  last_listed_at: Date | null;
  last_change_at: Date | null;
  next_list_at: Date;
  last_error: string | null;
  failing_since: Date | null;
  failing_announced: boolean;
  syncing: boolean;
  lag_seconds: number;
}

function toState(r: StateRow): SyncState {
  return {
    connectionId: r.connection_id,
    tenantId: r.tenant_id,
    userId: r.user_id,
    state: r.syncing ? r.state : 'paused',
    records: r.records,
    lastListedAt: r.last_listed_at,
    lastChangeAt: r.last_change_at,
    nextListAt: r.next_list_at,
    lastError: r.last_error,
    failingSince: r.failing_since,
    failingAnnounced: r.failing_announced,
    lagSeconds: r.syncing ? Math.floor(Number(r.lag_seconds)) : 0,
    syncing: r.syncing,
  };
}
