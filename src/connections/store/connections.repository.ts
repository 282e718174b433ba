import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { EntityRows } from '../../database/entity-rows.js';
import { preparedQuery } from '../../database/pg-pool.js';
import { ConnectionEntity, type ConnectionKind } from './connection.entity.js';
import { type ConnectionWithHealth, lastErrorOf } from './connection-health.repository.js';
import { type ConnectionFilter, ConnectionPages, LISTED_PROPERTIES, type PagedConnection, type PagePosition } from './connection-paging.js';

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
 * The connections table's rows as the API and the connect flow read and write them: the entity is the one
 * mapping of a row. The rest of the table's SQL sits beside this file, one file per capability: the list's
 * pages (connection-paging.ts), the renewal history (connection-health.repository.ts), renewal's lease
 * (renewal-lease.repository.ts) and its save (renewal-save.repository.ts), whose statements return only the
 * few columns renewal reads (RenewalRow).
 *
 * The reads on a request's path (the owner's connection on a cold cache, a connection by id, the list's pages)
 * are named prepared statements mapped by `EntityRows` (docs/benchmarks.md, "Prepared statements"); the rare
 * writes of the connect flow stay with TypeORM.
 */
@Injectable()
export class ConnectionsRepository {
  /** The list's page statements (the bench sends them too, `bench/scale-statements.ts`). */
  readonly pages: ConnectionPages;
  /** The entity's columns and the mapping of its rows. */
  private readonly rows: EntityRows<ConnectionEntity>;
  private readonly byId: string;
  private readonly byTenantAndId: string;
  private readonly userOf: string;
  private readonly adminOf: string;
  private readonly withHealth: string;

  constructor(@InjectDataSource() private readonly db: DataSource) {
    this.rows = new EntityRows(db, ConnectionEntity, 'c');
    this.pages = new ConnectionPages(new EntityRows(db, ConnectionEntity, 'c', LISTED_PROPERTIES));
    const from = `SELECT ${this.rows.select} FROM connections c`;
    this.byId = `${from} WHERE c.id = $1`;
    this.byTenantAndId = `${from} WHERE c.tenant_id = $1 AND c.id = $2`;
    this.userOf = `${from} WHERE c.tenant_id = $1 AND c.kind = 'user' AND c.user_id = $2`;
    this.adminOf = `${from} WHERE c.tenant_id = $1 AND c.kind = 'admin'`;
    this.withHealth = `SELECT ${this.rows.select}, h.last_error_code AS health_code, h.last_error_at AS health_at
       FROM connections c LEFT JOIN connection_health h ON h.connection_id = c.id WHERE c.tenant_id = $1 AND c.id = $2`;
  }

  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** The tenant's connection `id`; null when the tenant has none of that id. */
  findInTenant(tenantId: string, id: string): Promise<ConnectionEntity | null> {
    return this.one('cws_connections_by_tenant_id', this.byTenantAndId, [tenantId, id]);
  }

  /** Any tenant's connection by id (renewal knows connections by id only). */
  findInAnyTenant(id: string): Promise<ConnectionEntity | null> {
    return this.one('cws_connections_by_id', this.byId, [id]);
  }

  /** One page of a tenant's connections in creation order (connection-paging.ts). */
  async listPage(tenantId: string, filter: ConnectionFilter, after: PagePosition | null, limit: number): Promise<PagedConnection[]> {
    return this.pages.map(await preparedQuery(this.db, this.pages.query(tenantId, filter, after, limit)));
  }

  async findInTenantWithHealth(tenantId: string, id: string): Promise<ConnectionWithHealth | null> {
    const [r] = await preparedQuery(this.db, { name: 'cws_connections_with_health', text: this.withHealth, values: [tenantId, id] });
    return r ? { connection: this.rows.map(r), lastError: lastErrorOf(r.health_code as string | null, r.health_at as Date | null) } : null;
  }

  findUser(tenantId: string, userId: string): Promise<ConnectionEntity | null> {
    return this.one('cws_connections_user', this.userOf, [tenantId, userId]);
  }

  findAdmin(tenantId: string): Promise<ConnectionEntity | null> {
    return this.one('cws_connections_admin', this.adminOf, [tenantId]);
  }

  findOwner(tenantId: string, kind: ConnectionKind, userId: string | null, manager?: EntityManager): Promise<ConnectionEntity | null> {
    if (!manager) return kind === 'admin' ? this.findAdmin(tenantId) : this.findUser(tenantId, userId ?? '');
    const repo = manager.getRepository(ConnectionEntity);
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
  async deleteInTenant(manager: EntityManager, tenantId: string, id: string): Promise<ConnectionEntity | null> {
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
  async deleteOfUser(manager: EntityManager, tenantId: string, userId: string): Promise<number> {
    const [, n] = (await manager.query(`DELETE FROM connections WHERE tenant_id = $1 AND kind = 'user' AND user_id = $2`, [
      tenantId,
      userId,
    ])) as [unknown, number];
    return n;
  }

  private async one(name: string, text: string, values: unknown[]): Promise<ConnectionEntity | null> {
    const [r] = await preparedQuery(this.db, { name, text, values });
    return r ? this.rows.map(r) : null;
  }

  /** Removes up to `limit` of a deleted tenant's connections (tokens and history with them); answers how many. */
  async deleteSomeOfTenant(tenantId: string, limit: number): Promise<number> {
    const [, n] = (await this.db.query(
      `DELETE FROM connections WHERE id IN (SELECT id FROM connections WHERE tenant_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [tenantId, limit],
    )) as [unknown, number];
    return n;
  }
}
