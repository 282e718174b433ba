import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, Repository } from 'typeorm';
import { ConnectionEntity, type ConnectionKind } from './connection.entity.js';

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

@Injectable()
export class ConnectionsRepository {
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

  listForTenant(tenantId: string): Promise<ConnectionEntity[]> {
    return this.repo.find({ where: { tenantId }, order: { createdAt: 'ASC', id: 'ASC' } });
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
