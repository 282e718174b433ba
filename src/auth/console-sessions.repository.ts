import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ConsoleSessionEntity } from './console-session.entity.js';

@Injectable()
export class ConsoleSessionsRepository {
  constructor(@InjectRepository(ConsoleSessionEntity) private readonly repo: Repository<ConsoleSessionEntity>) {}

  async insert(session: ConsoleSessionEntity): Promise<void> {
    await this.repo.insert(session);
  }

  /** The session with this secret, unless it has expired. */
  async findLive(tokenHash: Buffer, now: Date): Promise<ConsoleSessionEntity | null> {
    return this.repo.createQueryBuilder('s').where('s.token_hash = :tokenHash AND s.expires_at > :now', { tokenHash, now }).getOne();
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
