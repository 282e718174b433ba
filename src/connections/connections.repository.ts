import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, Repository } from 'typeorm';
import { ConnectionEntity, type ConnectionKind, type ConnectionStatus } from './connection.entity.js';

export interface ConnectedFields {
  upstreamUserId: string;
  upstreamEmail: string | null;
  upstreamUsername: string | null;
  isAdmin: boolean;
  scopes: string[];
  accessTokenEnc: string;
  refreshTokenEnc: string;
  accessTokenExpiresAt: Date;
  refreshDueAt: Date;
  now: Date;
}

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

/** How many renewals each connection keeps in its history. */
export const RENEWAL_HISTORY = 20;

interface HealthItem extends RenewalRecord {
  id: string;
}

/** Renewal outcomes wait this long to be written together: they are diagnostics, not part of a renewal. */
const HEALTH_FLUSH_MS = 50;

@Injectable()
export class ConnectionsRepository implements BeforeApplicationShutdown {
  private healthBuffer: HealthItem[] = [];
  private healthFlush: Promise<void> | null = null;

  constructor(
    @InjectRepository(ConnectionEntity) private readonly repo: Repository<ConnectionEntity>,
    @InjectDataSource() private readonly db: DataSource,
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
  async listPage(tenantId: string, filter: ConnectionFilter, after: PagePosition | null, limit: number): Promise<Array<ConnectionWithHealth & { position: PagePosition }>> {
    const q = this.repo
      .createQueryBuilder('c')
      .leftJoin('connection_health', 'h', 'h.connection_id = c.id')
      .addSelect('h.last_error_code', 'health_code')
      .addSelect('h.last_error_at', 'health_at')
      .addSelect(`to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, 'position_at')
      .where('c.tenant_id = :tenantId', { tenantId });
    if (after) q.andWhere('(c.created_at, c.id) > (CAST(:afterAt AS timestamptz), CAST(:afterId AS uuid))', { afterAt: after.createdAt, afterId: after.id });
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
    const rows = (await this.db.query(`SELECT last_error_code, last_error_at FROM connection_health WHERE connection_id = $1`, [id])) as Array<{
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
    )) as Array<{ renewal_at: Date[] | null; renewal_outcome: RenewalOutcome[] | null; renewal_error: Array<string | null> | null; renewal_ms: number[] | null }>;
    if (rows.length === 0) return null;
    const r = rows[0];
    return (r.renewal_at ?? []).map((at, i) => ({ at, outcome: r.renewal_outcome![i], error: r.renewal_error![i] ?? null, durationMs: r.renewal_ms![i] }));
  }

  /**
   * Keeps a renewal's outcome: the history (the last RENEWAL_HISTORY) and lastError (set by a failure,
   * cleared by a success). The outcomes of HEALTH_FLUSH_MS go in one transaction that does not wait for its WAL
   * flush: under a renewal storm a few statements carry thousands of them, and none competes with the renewals'
   * own commits for the disk. A crash may lose the last moment of history, never a token. Resolves once written;
   * a connection deleted meanwhile is skipped.
   */
  recordRenewal(connectionId: string, record: RenewalRecord): Promise<void> {
    this.healthBuffer.push({ id: connectionId, ...record });
    this.healthFlush ??= new Promise((resolve) => setTimeout(resolve, HEALTH_FLUSH_MS)).then(() => this.flushHealth());
    return this.healthFlush;
  }

  /** Renewals finish during module destruction; their records are written before the pool closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.healthFlush?.catch(() => undefined);
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
    for (const round of rounds) await this.writeHealthRound(m, round);
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
          SET last_error_code = EXCLUDED.last_error_code, last_error_at = EXCLUDED.last_error_at,
              renewal_at = (EXCLUDED.renewal_at || h.renewal_at)[1:${RENEWAL_HISTORY}],
              renewal_outcome = (EXCLUDED.renewal_outcome || h.renewal_outcome)[1:${RENEWAL_HISTORY}],
              renewal_error = (EXCLUDED.renewal_error || h.renewal_error)[1:${RENEWAL_HISTORY}],
              renewal_ms = (EXCLUDED.renewal_ms || h.renewal_ms)[1:${RENEWAL_HISTORY}]`,
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
  async insert(manager: EntityManager, tenantId: string, id: string, kind: ConnectionKind, userId: string | null, f: ConnectedFields): Promise<boolean> {
    const rows = (await manager.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, upstream_email, upstream_username, is_admin, status, scopes,
                                access_token_enc, refresh_token_enc, access_token_expires_at, refresh_due_at, last_refreshed_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9::jsonb, $10, $11, $12, $13, NULL, $14, $14)
       ON CONFLICT DO NOTHING RETURNING id`,
      [id, tenantId, kind, userId, f.upstreamUserId, f.upstreamEmail, f.upstreamUsername, f.isAdmin, JSON.stringify(f.scopes), f.accessTokenEnc, f.refreshTokenEnc, f.accessTokenExpiresAt, f.refreshDueAt, f.now],
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
      [id, f.upstreamUserId, f.upstreamEmail, f.upstreamUsername, f.isAdmin, JSON.stringify(f.scopes), f.accessTokenEnc, f.refreshTokenEnc, f.accessTokenExpiresAt, f.refreshDueAt, f.now],
    );
    // The user connected again: whatever failed before is over (the history keeps it).
    await manager.query(`UPDATE connection_health SET last_error_code = NULL, last_error_at = NULL WHERE connection_id = $1 AND last_error_code IS NOT NULL`, [id]);
  }

  /** Deletes the row and with it both sealed tokens. */
  async delete(manager: EntityManager, tenantId: string, id: string): Promise<ConnectionEntity | null> {
    const [rows] = (await manager.query(`DELETE FROM connections WHERE tenant_id = $1 AND id = $2 RETURNING id, kind, user_id, upstream_user_id`, [tenantId, id])) as [
      Array<{ id: string; kind: ConnectionKind; user_id: string | null; upstream_user_id: string }>,
      number,
    ];
    const row = rows[0];
    if (!row) return null;
    return Object.assign(new ConnectionEntity(), { id: row.id, tenantId, kind: row.kind, userId: row.user_id, upstreamUserId: row.upstream_user_id });
  }
}

function lastErrorOf(code: string | null, at: Date | null): LastError | null {
  return code && at ? { code, at } : null;
}
