import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource, EntityManager, Repository } from 'typeorm';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { preparedQuery } from '../database/pg-pool.js';
import { GroupCommitLane, type LaneHold } from './commit-lane.js';
import { ConnectionEntity, type ConnectionKind, type ConnectionStatus } from './connection.entity.js';

/** The new token pair of a renewal, sealed, with the timing that follows from its expiresIn. */
export interface RenewedFields {
  accessTokenEnc: string;
  refreshTokenEnc: string;
  accessTokenExpiresAt: Date;
  refreshDueAt: Date;
  now: Date;
}

/** A connect (or reconnect): the upstream user and the first token pair. */
export interface ConnectedFields extends RenewedFields {
  upstreamUserId: string;
  upstreamEmail: string | null;
  upstreamUsername: string | null;
  isAdmin: boolean;
  scopes: string[];
}

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

/**
 * A renewed pair to save, with the version and lease it was renewed under, and how long the renewal took until
 * the pair was handed to its save (its line in the history: the save writes it with the pair).
 */
export type RenewedItem = RenewedFields & { id: string; tenantId: string; version: number; durationMs: number };

/** Ids per notification, as the change trigger sends them (NOTIFY payloads stay under 8,000 bytes). */
const IDS_PER_NOTIFICATION = 100;

/** Renewed connections are announced to the other instances this long after the first of them committed. */
const ANNOUNCE_AFTER_MS = 20;

// The expiry comes back as epoch milliseconds (a float8, parsed by parseFloat): cheaper than timestamptz text.
const RENEWAL_ROW_COLUMNS = `c.id, c.tenant_id, c.status, c.version, c.access_token_enc, c.refresh_token_enc, c.refresh_failures,
        (extract(epoch FROM c.access_token_expires_at) * 1000)::float8 AS access_token_expires_ms`;
const RENEWAL_COLUMNS = `${RENEWAL_ROW_COLUMNS}, (SELECT t.environment FROM tenants t WHERE t.id = c.tenant_id) AS environment`;

type Row = Record<string, unknown>;

/**
 * A renewal's hold on the commit lane (commit-lane.ts), taken before its token call: its pair is then
 * committed the moment it arrives, or with the pairs that arrived during the one commit in flight.
 */
export type CommitLane = LaneHold<RenewedItem>;

/** Holds beyond REFRESH_CONCURRENCY, for on-demand renewals (a caller whose token expired, a 401, a forced renewal). */
const ON_DEMAND_LANES = 4;

/** How long the lane's commit may wait for a row lock held by another transaction (see reserveCommitLane). */
const LANE_LOCK_TIMEOUT_MS = 1000;

/** How many renewals each connection keeps in its history. */
export const RENEWAL_HISTORY = 20;

/**
 * The scheduler's claim: up to $3 due connections leased to $1 for $2 ms, skipping rows another instance holds
 * (SKIP LOCKED), each with its tenant's environment.
 */
export const CLAIM_DUE_SQL = `UPDATE connections c SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
         FROM (SELECT id, tenant_id FROM connections
                WHERE status = 'active' AND refresh_due_at <= now() AND (lease_until IS NULL OR lease_until < now())
                ORDER BY refresh_due_at
                LIMIT $3
                FOR UPDATE SKIP LOCKED) due
         JOIN tenants t ON t.id = due.tenant_id
        WHERE c.id = due.id AND c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until < now())
        RETURNING ${RENEWAL_ROW_COLUMNS}, t.environment`;

/**
 * The CAS save of renewed pairs, and in the same statement the history line of each pair that landed (a
 * success also clears lastError). Written apart, after the fact, the line cost a statement of its own per
 * renewal batch that re-parsed every value as text, checked that the connection still existed and ran its
 * own transaction: about 17 µs of PostgreSQL CPU per renewal, against about 8 inside the save
 * (bench/micro-renewal-sql.ts, docs/renewal.md). Written with the pair, the line also lands exactly when the
 * pair does, under the lease, so no other renewal's line can come between. The history rows are locked in id
 * order, as the pairs are.
 */
export const SAVE_RENEWED_SQL = `WITH saved AS (
  UPDATE connections c SET access_token_enc = v.at, refresh_token_enc = v.rt, access_token_expires_at = to_timestamp(v.exp_ms / 1000),
        refresh_due_at = to_timestamp(v.due_ms / 1000), last_refreshed_at = to_timestamp(v.now_ms / 1000), refresh_failures = 0,
        version = c.version + 1, lease_owner = NULL, lease_until = NULL, updated_at = to_timestamp(v.now_ms / 1000)
   FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::float8[], $7::float8[], $8::float8[], $9::integer[])
        AS v(id, version, at, rt, exp_ms, due_ms, now_ms, ms)
  WHERE c.id = v.id AND c.version = v.version AND c.lease_owner = $1
  RETURNING c.id, c.last_refreshed_at, v.ms
), history AS (
  INSERT INTO connection_health AS h (connection_id, renewal_at, renewal_outcome, renewal_error, renewal_ms)
  SELECT s.id, ARRAY[s.last_refreshed_at], '{renewed}', '{NULL}', ARRAY[s.ms] FROM saved s ORDER BY s.id
  ON CONFLICT (connection_id) DO UPDATE
     SET last_error_code = NULL, last_error_at = NULL,
         renewal_at = (EXCLUDED.renewal_at || h.renewal_at)[1:${RENEWAL_HISTORY}],
         renewal_outcome = (EXCLUDED.renewal_outcome || h.renewal_outcome)[1:${RENEWAL_HISTORY}],
         renewal_error = (EXCLUDED.renewal_error || h.renewal_error)[1:${RENEWAL_HISTORY}],
         renewal_ms = (EXCLUDED.renewal_ms || h.renewal_ms)[1:${RENEWAL_HISTORY}]
)
SELECT id FROM saved`;

/**
 * How many lines of a history row are newer than the incoming one (EXCLUDED, one line): a line recorded after
 * the fact (a failure, buffered for HEALTH_FLUSH_MS) may reach the row after a newer success that was written
 * with its pair, and must then go behind it and leave lastError alone.
 */
const NEWER_LINES = `(SELECT count(*)::int FROM unnest(h.renewal_at) AS t(at) WHERE t.at > EXCLUDED.renewal_at[1])`;

/** A history column with the incoming line placed by time, newest first, cut to RENEWAL_HISTORY. */
const placed = (column: string) =>
  `(h.${column}[1:${NEWER_LINES}] || EXCLUDED.${column} || h.${column}[${NEWER_LINES} + 1:])[1:${RENEWAL_HISTORY}]`;

/** The last failed renewal of a connection that has not worked since (cleared by a success or a reconnect). */
export interface LastError {
  code: string;
  at: Date;
}

export type RenewalOutcome = 'renewed' | 'failed' | 'reauth_required';

/** One renewal that held the lease: what came of it, and how long it took. */
export interface RenewalRecord {
  at: Date;
  outcome: RenewalOutcome;
  /** The error code of a failed renewal (`upstream_unavailable`, `refresh_token_rejected`, ...); null when renewed. */
  error: string | null;
  durationMs: number;
}

export interface ConnectionWithHealth {
  connection: ConnectionEntity;
  lastError: LastError | null;
}

/** Where a page starts: after this (created_at, id), created_at as PostgreSQL's exact text (microseconds). */
export interface PagePosition {
  createdAt: string;
  id: string;
}

export interface ConnectionFilter {
  userId?: string;
  kind?: ConnectionKind;
  status?: ConnectionStatus;
}

interface HealthItem extends RenewalRecord {
  id: string;
}

/** Renewal outcomes wait this long to be written together: they are diagnostics, not part of a renewal. */
const HEALTH_FLUSH_MS = 50;

/**
 * Every read and write of the connections table (and of its connection_health diagnostics): the API's,
 * the connect flow's and renewal's hot path. The entity is the one mapping of a row; renewal's statements
 * return only the few columns it reads (RenewalRow).
 */
@Injectable()
export class ConnectionsRepository implements BeforeApplicationShutdown, OnApplicationShutdown {
  private healthBuffer: HealthItem[] = [];
  private healthFlush: Promise<void> | null = null;
  private lane: GroupCommitLane<RenewedItem> | null = null;
  private readonly toAnnounce: Array<{ tenantId: string; id: string }> = [];
  private announcing: Promise<void> | null = null;

  constructor(
    @InjectRepository(ConnectionEntity) private readonly repo: Repository<ConnectionEntity>,
    @InjectDataSource() private readonly db: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  getById(tenantId: string, id: string): Promise<ConnectionEntity | null> {
    return this.repo.findOneBy({ tenantId, id });
  }

  /**
   * One page of a tenant's connections in creation order (created_at, id), after `after`: a keyset read on
   * ix_connections_tenant_created, so the cost of a page does not grow with its depth. Answers `limit + 1`
   * rows at most, each with the position that a page starting after it needs.
   */
  async listPage(
    tenantId: string,
    filter: ConnectionFilter,
    after: PagePosition | null,
    limit: number,
  ): Promise<Array<ConnectionWithHealth & { position: PagePosition }>> {
    const q = this.repo
      .createQueryBuilder('c')
      .leftJoin('connection_health', 'h', 'h.connection_id = c.id')
      .addSelect('h.last_error_code', 'health_code')
      .addSelect('h.last_error_at', 'health_at')
      .addSelect(`to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, 'position_at')
      .where('c.tenant_id = :tenantId', { tenantId });
    if (after)
      q.andWhere('(c.created_at, c.id) > (CAST(:afterAt AS timestamptz), CAST(:afterId AS uuid))', {
        afterAt: after.createdAt,
        afterId: after.id,
      });
    // A user id names a user connection: saying so lets the planner use the unique (tenant_id, user_id) index.
    if (filter.userId !== undefined) q.andWhere(`c.kind = 'user' AND c.user_id = :userId`, { userId: filter.userId });
    if (filter.kind) q.andWhere('c.kind = :kind', { kind: filter.kind });
    if (filter.status) q.andWhere('c.status = :status', { status: filter.status });
    const { entities, raw } = await q
      .orderBy('c.created_at', 'ASC')
      .addOrderBy('c.id', 'ASC')
      .limit(limit + 1)
      .getRawAndEntities<{ c_id: string; health_code: string | null; health_at: Date | null; position_at: string }>();
    const extra = new Map(raw.map((r) => [r.c_id, r]));
    return entities.map((connection) => {
      const r = extra.get(connection.id)!;
      return { connection, lastError: lastErrorOf(r.health_code, r.health_at), position: { createdAt: r.position_at, id: connection.id } };
    });
  }

  async getWithHealth(tenantId: string, id: string): Promise<ConnectionWithHealth | null> {
    const connection = await this.getById(tenantId, id);
    if (!connection) return null;
    const rows = (await this.db.query(`SELECT last_error_code, last_error_at FROM connection_health WHERE connection_id = $1`, [
      id,
    ])) as Array<{
      last_error_code: string | null;
      last_error_at: Date | null;
    }>;
    return { connection, lastError: lastErrorOf(rows[0]?.last_error_code ?? null, rows[0]?.last_error_at ?? null) };
  }

  /** The connection's last renewals, newest first; null when the tenant has no such connection. */
  async renewalHistory(tenantId: string, id: string): Promise<RenewalRecord[] | null> {
    const rows = (await this.db.query(
      `SELECT h.renewal_at, h.renewal_outcome, h.renewal_error, h.renewal_ms
         FROM connections c LEFT JOIN connection_health h ON h.connection_id = c.id
        WHERE c.tenant_id = $1 AND c.id = $2`,
      [tenantId, id],
    )) as Array<{
      renewal_at: Date[] | null;
      renewal_outcome: RenewalOutcome[] | null;
      renewal_error: Array<string | null> | null;
      renewal_ms: number[] | null;
    }>;
    if (rows.length === 0) return null;
    const r = rows[0];
    return (r.renewal_at ?? []).map((at, i) => ({
      at,
      outcome: r.renewal_outcome![i],
      error: r.renewal_error![i] ?? null,
      durationMs: r.renewal_ms![i],
    }));
  }

  /**
   * Keeps the outcome of a renewal that did not save a pair (a renewed pair's line is written by its save):
   * the history (the last RENEWAL_HISTORY) and lastError (set by a failure, cleared by a success), each line
   * placed by its time. The outcomes of HEALTH_FLUSH_MS go in one transaction that does not wait for its WAL
   * flush: under an outage a few statements carry thousands of them, and none competes with the renewals' own
   * commits for the disk. A crash may lose the last moment of history, never a token. Resolves once written;
   * a connection deleted meanwhile is skipped.
   */
  recordRenewal(connectionId: string, record: RenewalRecord): Promise<void> {
    this.healthBuffer.push({ id: connectionId, ...record });
    this.healthFlush ??= new Promise((resolve) => setTimeout(resolve, HEALTH_FLUSH_MS)).then(() => this.flushHealth());
    return this.healthFlush;
  }

  /** Renewals finish during module destruction; their records and announcements are written before the pool closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([this.healthFlush?.catch(() => undefined), this.announcing]);
  }

  private async flushHealth(): Promise<void> {
    const items = this.healthBuffer;
    this.healthBuffer = [];
    this.healthFlush = null;
    const write = () =>
      this.db.transaction(async (m) => {
        await m.query(`SET LOCAL synchronous_commit = off`);
        await this.writeHealth(m, items);
      });
    try {
      await write();
    } catch (e) {
      // A connection deleted after the statement's snapshot fails its foreign key; once more, it is skipped.
      if ((e as { code?: unknown }).code !== '23503') throw e;
      await write();
    }
  }

  private async writeHealth(m: EntityManager, items: HealthItem[]): Promise<void> {
    // ON CONFLICT may touch a row only once per statement: a second outcome of one connection in the same batch
    // goes in the next statement. Oldest first, so that the newest ends in front and decides lastError.
    const rounds: HealthItem[][] = [];
    const seen = new Map<string, number>();
    for (const item of [...items].sort((a, b) => a.at.getTime() - b.at.getTime())) {
      const k = seen.get(item.id) ?? 0;
      seen.set(item.id, k + 1);
      (rounds[k] ??= []).push(item);
    }
    for (const round of rounds) {
      // Rows locked in id order, as the pairs' saves lock theirs.
      round.sort((a, b) => (a.id < b.id ? -1 : 1));
      await this.writeHealthRound(m, round);
    }
  }

  private async writeHealthRound(m: EntityManager, items: HealthItem[]): Promise<void> {
    const failed = (i: HealthItem) => i.outcome !== 'renewed';
    await m.query(
      `INSERT INTO connection_health AS h (connection_id, last_error_code, last_error_at, renewal_at, renewal_outcome, renewal_error, renewal_ms)
       SELECT v.id, v.code, v.error_at, ARRAY[v.at], ARRAY[v.outcome], ARRAY[v.error], ARRAY[v.ms]
         FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[], $7::integer[])
              AS v(id, code, error_at, at, outcome, error, ms)
        WHERE EXISTS (SELECT 1 FROM connections c WHERE c.id = v.id)
       ON CONFLICT (connection_id) DO UPDATE
          SET last_error_code = CASE WHEN ${NEWER_LINES} = 0 THEN EXCLUDED.last_error_code ELSE h.last_error_code END,
              last_error_at = CASE WHEN ${NEWER_LINES} = 0 THEN EXCLUDED.last_error_at ELSE h.last_error_at END,
              renewal_at = ${placed('renewal_at')}, renewal_outcome = ${placed('renewal_outcome')},
              renewal_error = ${placed('renewal_error')}, renewal_ms = ${placed('renewal_ms')}`,
      [
        items.map((i) => i.id),
        items.map((i) => (failed(i) ? (i.error ?? 'unknown') : null)),
        items.map((i) => (failed(i) ? i.at : null)),
        items.map((i) => i.at),
        items.map((i) => i.outcome),
        items.map((i) => i.error),
        items.map((i) => i.durationMs),
      ],
    );
  }

  findUser(tenantId: string, userId: string): Promise<ConnectionEntity | null> {
    return this.repo.findOneBy({ tenantId, kind: 'user', userId });
  }

  findAdmin(tenantId: string): Promise<ConnectionEntity | null> {
    return this.repo.findOneBy({ tenantId, kind: 'admin' });
  }

  findOwner(tenantId: string, kind: ConnectionKind, userId: string | null, manager?: EntityManager): Promise<ConnectionEntity | null> {
    const repo = manager ? manager.getRepository(ConnectionEntity) : this.repo;
    return kind === 'admin' ? repo.findOneBy({ tenantId, kind }) : repo.findOneBy({ tenantId, kind, userId: userId ?? '' });
  }

  /** Inserts a new connection; false when one for the same owner appeared meanwhile. */
  async insert(
    manager: EntityManager,
    tenantId: string,
    id: string,
    kind: ConnectionKind,
    userId: string | null,
    f: ConnectedFields,
  ): Promise<boolean> {
    const rows = (await manager.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, upstream_email, upstream_username, is_admin, status, scopes,
                                access_token_enc, refresh_token_enc, access_token_expires_at, refresh_due_at, last_refreshed_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9::jsonb, $10, $11, $12, $13, NULL, $14, $14)
       ON CONFLICT DO NOTHING RETURNING id`,
      [
        id,
        tenantId,
        kind,
        userId,
        f.upstreamUserId,
        f.upstreamEmail,
        f.upstreamUsername,
        f.isAdmin,
        JSON.stringify(f.scopes),
        f.accessTokenEnc,
        f.refreshTokenEnc,
        f.accessTokenExpiresAt,
        f.refreshDueAt,
        f.now,
      ],
    )) as Array<{ id: string }>;
    return rows.length === 1;
  }

  /** A reconnect: new tokens on the same row, a new version (so an in-flight renewal's save is refused). */
  async replaceTokens(manager: EntityManager, id: string, f: ConnectedFields): Promise<void> {
    await manager.query(
      `UPDATE connections SET upstream_user_id = $2, upstream_email = $3, upstream_username = $4, is_admin = $5, status = 'active', status_reason = NULL,
              scopes = $6::jsonb, access_token_enc = $7, refresh_token_enc = $8, access_token_expires_at = $9, refresh_due_at = $10,
              refresh_failures = 0, version = version + 1, lease_owner = NULL, lease_until = NULL, updated_at = $11
        WHERE id = $1`,
      [
        id,
        f.upstreamUserId,
        f.upstreamEmail,
        f.upstreamUsername,
        f.isAdmin,
        JSON.stringify(f.scopes),
        f.accessTokenEnc,
        f.refreshTokenEnc,
        f.accessTokenExpiresAt,
        f.refreshDueAt,
        f.now,
      ],
    );
    // The user connected again: whatever failed before is over (the history keeps it).
    await manager.query(
      `UPDATE connection_health SET last_error_code = NULL, last_error_at = NULL WHERE connection_id = $1 AND last_error_code IS NOT NULL`,
      [id],
    );
  }

  /** Deletes the row and with it both sealed tokens. */
  async delete(manager: EntityManager, tenantId: string, id: string): Promise<ConnectionEntity | null> {
    const [rows] = (await manager.query(
      `DELETE FROM connections WHERE tenant_id = $1 AND id = $2 RETURNING id, kind, user_id, upstream_user_id`,
      [tenantId, id],
    )) as [Array<{ id: string; kind: ConnectionKind; user_id: string | null; upstream_user_id: string }>, number];
    const row = rows[0];
    if (!row) return null;
    return Object.assign(new ConnectionEntity(), {
      id: row.id,
      tenantId,
      kind: row.kind,
      userId: row.user_id,
      upstreamUserId: row.upstream_user_id,
    });
  }

  /**
   * Serialises what writes an end user's data (a connect completing, an erasure) for one (tenant, user), until
   * the caller's transaction ends: an erasure and a connect of the same user never interleave.
   */
  async lockUser(manager: EntityManager, tenantId: string, userId: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended('cws-user:' || $1 || '/' || $2, 0))`, [tenantId, userId]);
  }

  /** Deletes every connection of the partner's end user (their sealed tokens and renewal history with them); answers how many. */
  async deleteUser(manager: EntityManager, tenantId: string, userId: string): Promise<number> {
    const [, n] = (await manager.query(`DELETE FROM connections WHERE tenant_id = $1 AND kind = 'user' AND user_id = $2`, [
      tenantId,
      userId,
    ])) as [unknown, number];
    return n;
  }

  /** Removes up to `limit` of a deleted tenant's connections (tokens and history with them); answers how many. */
  async deleteSomeOfTenant(tenantId: string, limit: number): Promise<number> {
    const [, n] = (await this.db.query(
      `DELETE FROM connections WHERE id IN (SELECT id FROM connections WHERE tenant_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [tenantId, limit],
    )) as [unknown, number];
    return n;
  }

  // ---- Renewal. Leases and due times are compared with the database's now(), so that instances with
  // skewed clocks still agree on whose lease is live.

  /** Any tenant's connection by id (renewal knows connections by id only). */
  findById(id: string): Promise<ConnectionEntity | null> {
    return this.repo.findOneBy({ id });
  }

  async onApplicationShutdown(): Promise<void> {
    const lane = this.lane;
    this.lane = null;
    await lane?.close();
  }

  /**
   * Takes a hold on renewal's commit lane (REFRESH_CONCURRENCY + 4 holds at most; the lane's one connection
   * is opened by the first hold and closed after 10 s without one). Waiting for a hold or for the connection
   * happens before the token call, where it costs nothing but time.
   */
  reserveCommitLane(): Promise<CommitLane> {
    this.lane ??= new GroupCommitLane<RenewedItem>(
      {
        connectionString: this.config.databaseUrl ?? undefined,
        applicationName: `cws-connect ${this.config.instanceId} renewal`,
        // The change trigger stays silent on this session: a NOTIFY would serialize the commits (migration
        // DeferredRenewalNotify); announceRenewed sends the notifications instead. A row lock held by someone
        // else (a reconnect's transaction) may hold the lane's commit at most this long: then every pair in
        // it goes to its own retry on the shared pool.
        // The save's generic plan (a nested loop over the pairs, by primary key) is the right one for any number of
        // pairs; a custom plan per execution cost about 90 µs of planning per commit.
        options: `-c cws.defer_change_notify=on -c lock_timeout=${LANE_LOCK_TIMEOUT_MS} -c plan_cache_mode=force_generic_plan`,
        holds: this.config.refresh.concurrency + ON_DEMAND_LANES,
        idleMs: 10_000,
        connectTimeoutMs: 5000,
      },
      async (run, owner, items) => {
        const saved = await runSave(run, owner, items);
        for (const item of items) if (saved.has(item.id)) this.announceRenewed(item.tenantId, item.id);
        return saved;
      },
    );
    return this.lane.reserve();
  }

  /**
   * Tells the other instances' caches (src/changes) that a connection saved on the commit lane changed, as the
   * trigger would have: `connections:<tenant>:<id>,...`. The ids committed within ANNOUNCE_AFTER_MS of the first
   * go together in one statement (under a renewal storm the lane commits every millisecond or two, and one
   * notifying transaction per commit cost about as much as the commit). Best effort: a cache that misses it
   * serves the previous token, which the upstream answers with 401, and routing renews on 401 by version
   * (docs/renewal.md).
   */
  private announceRenewed(tenantId: string, id: string): void {
    this.toAnnounce.push({ tenantId, id });
    this.announcing ??= (async () => {
      try {
        await new Promise((resolve) => setTimeout(resolve, ANNOUNCE_AFTER_MS));
        while (this.toAnnounce.length > 0) {
          const batch = this.toAnnounce.splice(0, 10_000);
          const byTenant = new Map<string, string[]>();
          for (const c of batch) {
            const ids = byTenant.get(c.tenantId);
            if (ids) ids.push(c.id);
            else byTenant.set(c.tenantId, [c.id]);
          }
          const messages: string[] = [];
          for (const [tenant, ids] of byTenant) {
            for (let i = 0; i < ids.length; i += IDS_PER_NOTIFICATION)
              messages.push(`connections:${tenant}:${ids.slice(i, i + IDS_PER_NOTIFICATION).join(',')}`);
          }
          await this.query(`SELECT pg_notify('cws_changes', m) FROM unnest($1::text[]) AS m`, [messages]).catch(() => undefined);
        }
      } finally {
        this.announcing = null;
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
   *
   * The tenant's environment (which never changes, tenants.controller) comes from a join, looked up once per
   * tenant in the batch (Memoize), not by a subquery per row, whose generic plan read the whole tenants table
   * per row once there were a few hundred tenants.
   */
  async claimDueForRefresh(owner: string, leaseMs: number, limit: number): Promise<LeasedConnection[]> {
    const rows = await this.prepared('cws_refresh_claim', CLAIM_DUE_SQL, [owner, leaseMs, limit]);
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
    return runSave(async (q) => ({ rows: await preparedQuery<Row>(this.db, q) }), owner, items);
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

  /**
   * Every lease `owner` holds, given back (a drain's last renewal step, once its renewals have committed).
   * No index serves lease_owner: one scan of the table per instance stop.
   */
  async releaseLeasesOf(owner: string): Promise<number> {
    const rows = await this.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1 RETURNING id`, [
      owner,
    ]);
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

  /** Seconds since the most overdue active connection fell due (0 when none is), for the overdue gauge. */
  async oldestOverdueSeconds(): Promise<number> {
    const rows = await this.query(
      `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(refresh_due_at)), 0)::double precision AS s
         FROM connections WHERE status = 'active' AND refresh_due_at <= now()`,
      [],
    );
    return Math.max(0, Number(rows[0]?.s ?? 0));
  }

  /** The scheduler's two hot statements (claim, group save) go as named prepared statements (`preparedQuery`). */
  private prepared(name: string, sql: string, params: unknown[]): Promise<Row[]> {
    return preparedQuery<Row>(this.db, { name, text: sql, values: params });
  }

  private async query(sql: string, params: unknown[]): Promise<Row[]> {
    const result = (await this.db.query(sql, params)) as Row[] | [Row[], number];
    // TypeORM answers an UPDATE ... RETURNING with [rows, count] and a SELECT with rows.
    return Array.isArray(result[0]) ? (result[0] as Row[]) : (result as Row[]);
  }
}

function lastErrorOf(code: string | null, at: Date | null): LastError | null {
  return code && at ? { code, at } : null;
}

/** The CAS save of renewed pairs (with their history lines), as a named prepared statement on whichever connection runs it. */
async function runSave(run: (q: pg.QueryConfig) => Promise<{ rows: Row[] }>, owner: string, items: RenewedItem[]): Promise<Set<string>> {
  const sorted = items.length > 1 ? [...items].sort((x, y) => (x.id < y.id ? -1 : 1)) : items;
  const n = sorted.length;
  const [ids, versions, ats, rts, exps, dues, nows, durations] = [
    new Array<string>(n),
    new Array<number>(n),
    new Array<string>(n),
    new Array<string>(n),
    new Array<number>(n),
    new Array<number>(n),
    new Array<number>(n),
    new Array<number>(n),
  ];
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
    durations[k] = i.durationMs;
  }
  const { rows } = await run({
    name: 'cws_refresh_save',
    text: SAVE_RENEWED_SQL,
    values: [owner, ids, versions, ats, rts, exps, dues, nows, durations],
  });
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
