import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { ConnectSessionEntity } from './connect-session.entity.js';

@Injectable()
export class ConnectSessionsRepository {
  constructor(@InjectRepository(ConnectSessionEntity) private readonly repo: Repository<ConnectSessionEntity>) {}

  async insert(session: ConnectSessionEntity): Promise<void> {
    await this.repo.insert(session);
  }

  /** Opens a session once: sets its state and the browser it is bound to. Null when unknown, already opened or expired. */
  async start(
    tokenHash: Buffer,
    stateHash: Buffer,
    browserHash: Buffer,
    now: Date,
    stateExpiresAt: Date,
  ): Promise<ConnectSessionEntity | null> {
    const rows = await this.updateReturning(
      `UPDATE connect_sessions SET started_at = $3, state_hash = $2, state_expires_at = $4, browser_hash = $5
        WHERE token_hash = $1 AND started_at IS NULL AND expires_at > $3 RETURNING *`,
      [tokenHash, stateHash, now, stateExpiresAt, browserHash],
    );
    return rows[0] ?? null;
  }

  /** Marks a session not yet opened as running in a popup; false when it was opened already. */
  async markPopup(id: string): Promise<boolean> {
    const result = await this.repo
      .createQueryBuilder()
      .update(ConnectSessionEntity)
      .set({ display: 'popup' })
      .where('id = :id AND started_at IS NULL', { id })
      .execute();
    return (result.affected ?? 0) === 1;
  }

  findInAnyTenant(id: string): Promise<ConnectSessionEntity | null> {
    return this.repo.findOneBy({ id });
  }

  findByTokenHash(tokenHash: Buffer): Promise<ConnectSessionEntity | null> {
    return this.repo.findOneBy({ tokenHash });
  }

  /**
   * Consumes a state exactly once, atomically, and only from the browser it was issued to; null when
   * unknown, already used or presented by another browser (then nothing changes).
   */
  async consumeState(stateHash: Buffer, browserHash: Buffer, now: Date): Promise<ConnectSessionEntity | null> {
    const rows = await this.updateReturning(
      `UPDATE connect_sessions SET completed_at = $2 WHERE state_hash = $1 AND browser_hash = $3 AND completed_at IS NULL RETURNING *`,
      [stateHash, now, browserHash],
    );
    return rows[0] ?? null;
  }

  /** Reads without consuming: the callback needs the session's environment to pick the strategy. */
  findByStateHash(stateHash: Buffer): Promise<ConnectSessionEntity | null> {
    return this.repo.findOneBy({ stateHash });
  }

  /** Whether the session is still there, in the caller's transaction (an erasure deletes a user's sessions). */
  async existsIn(manager: EntityManager, id: string): Promise<boolean> {
    const rows = (await manager.query(`SELECT 1 FROM connect_sessions WHERE id = $1`, [id])) as unknown[];
    return rows.length === 1;
  }

  /** Deletes the end user's connect sessions; answers how many. */
  async deleteOfUser(manager: EntityManager, tenantId: string, userId: string): Promise<number> {
    const [, n] = (await manager.query(`DELETE FROM connect_sessions WHERE tenant_id = $1 AND user_id = $2`, [tenantId, userId])) as [
      unknown,
      number,
    ];
    return n;
  }

  /** Removes up to `limit` of a deleted tenant's connect sessions; answers how many. */
  async deleteSomeOfTenant(tenantId: string, limit: number): Promise<number> {
    const [, n] = (await this.repo.query(
      `DELETE FROM connect_sessions WHERE id IN (SELECT id FROM connect_sessions WHERE tenant_id = $1 LIMIT $2)`,
      [tenantId, limit],
    )) as [unknown, number];
    return n;
  }

  async deleteExpired(before: Date): Promise<number> {
    const result = await this.repo
      .createQueryBuilder()
      .delete()
      .from(ConnectSessionEntity)
      .where('expires_at < :before', { before })
      .execute();
    return result.affected ?? 0;
  }

  private async updateReturning(sql: string, params: unknown[]): Promise<ConnectSessionEntity[]> {
    // TypeORM's raw UPDATE ... RETURNING answers [rows, count]; map the snake_case rows to entities.
    const [rows] = (await this.repo.query(sql, params)) as [Array<Record<string, unknown>>, number];
    return rows.map((r) => this.repo.create(fromRow(r)));
  }
}

function fromRow(r: Record<string, unknown>): Partial<ConnectSessionEntity> {
  return {
    id: r.id as string,
    tenantId: r.tenant_id as string,
    kind: r.kind as ConnectSessionEntity['kind'],
    userId: (r.user_id as string | null) ?? null,
    returnUrl: r.return_url as string,
    scopes: r.scopes as string[],
    tokenHash: r.token_hash as Buffer,
    stateHash: (r.state_hash as Buffer | null) ?? null,
    browserHash: (r.browser_hash as Buffer | null) ?? null,
    expiresAt: r.expires_at as Date,
    startedAt: (r.started_at as Date | null) ?? null,
    stateExpiresAt: (r.state_expires_at as Date | null) ?? null,
    completedAt: (r.completed_at as Date | null) ?? null,
    display: (r.display as 'popup' | null) ?? null,
    createdAt: r.created_at as Date,
  };
}
