import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { EntityRows } from '../database/entity-rows.js';
import { preparedQuery } from '../database/pg-pool.js';
import { ConsoleSessionEntity } from './console-session.entity.js';

@Injectable()
export class ConsoleSessionsRepository {
  private readonly rows: EntityRows<ConsoleSessionEntity>;
  private readonly live: string;

  constructor(
    @InjectRepository(ConsoleSessionEntity) private readonly repo: Repository<ConsoleSessionEntity>,
    @InjectDataSource() private readonly db: DataSource,
  ) {
    this.rows = new EntityRows(db, ConsoleSessionEntity, 's');
    this.live = `SELECT ${this.rows.select} FROM console_sessions s WHERE s.token_hash = $1 AND s.expires_at > $2`;
  }

  async insert(session: ConsoleSessionEntity): Promise<void> {
    await this.repo.insert(session);
  }

  /** The session with this secret, unless it has expired (a named prepared statement: every console request asks). */
  async findLive(tokenHash: Buffer, now: Date): Promise<ConsoleSessionEntity | null> {
    const [r] = await preparedQuery(this.db, { name: 'cws_console_sessions_live', text: this.live, values: [tokenHash, now] });
    return r ? this.rows.map(r) : null;
  }

  /** The live sessions of any of these secrets (the shared lookups of ConsoleSessionsService). */
  async findLiveMany(tokenHashes: Buffer[], now: Date): Promise<ConsoleSessionEntity[]> {
    return this.repo
      .createQueryBuilder('s')
      .where('s.token_hash IN (:...tokenHashes) AND s.expires_at > :now', { tokenHashes, now })
      .getMany();
  }

  /** The id of the session deleted, null when none had this secret. */
  async deleteByTokenHash(tokenHash: Buffer): Promise<string | null> {
    const result = await this.repo
      .createQueryBuilder()
      .delete()
      .from(ConsoleSessionEntity)
      .where('token_hash = :tokenHash', { tokenHash })
      .returning('id')
      .execute();
    const rows = result.raw as Array<{ id: string }>;
    return rows[0]?.id ?? null;
  }

  async deleteExpired(before: Date): Promise<number> {
    const result = await this.repo
      .createQueryBuilder()
      .delete()
      .from(ConsoleSessionEntity)
      .where('expires_at <= :before', { before })
      .execute();
    return result.affected ?? 0;
  }
}
