import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/** How long a sweep batch may wait for a row lock or run at all: it never holds locks anyone waits on for long. */
const BATCH_LOCK_TIMEOUT = '1s';
const BATCH_STATEMENT_TIMEOUT = '5s';

/**
 * The row-by-row removals of the events table and of its attempts (the day partitions themselves are
 * dropped by `EventPartitions`): a tenant's events past a window shorter than the partitions', a deleted
 * tenant's events, and an erased user's. Reads and writes of events are `EventsRepository`'s.
 */
@Injectable()
export class EventsRemoval {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Removes up to `limit` of the tenant's events received before `before` (null: all of them) and their
   * attempts, in one short transaction: rows another transaction holds are skipped (SKIP LOCKED) and taken by
   * a later batch. Answers how many events went.
   */
  async removeSome(tenantId: string, before: Date | null, limit: number): Promise<number> {
    return this.db.transaction(async (m) => {
      await m.query(`SET LOCAL lock_timeout = '${BATCH_LOCK_TIMEOUT}'`);
      await m.query(`SET LOCAL statement_timeout = '${BATCH_STATEMENT_TIMEOUT}'`);
      const [{ n }] = (await m.query(
        `WITH doomed AS (
           SELECT id, received_at FROM events
            WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR received_at < $2)
            ORDER BY received_at LIMIT $3 FOR UPDATE SKIP LOCKED),
         attempts AS (
           DELETE FROM event_attempts a
            WHERE a.event_id IN (SELECT id FROM doomed) AND a.at >= (SELECT min(received_at) FROM doomed)),
         gone AS (
           DELETE FROM events e USING doomed d WHERE e.id = d.id AND e.received_at = d.received_at RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [tenantId, before, limit],
      )) as Array<{ n: number }>;
      return n;
    });
  }

  /**
   * Removes, in the caller's transaction, every event attributed to the tenant's end user and their attempts:
   * the service's own events about the user's connections (`user_id`, or for rows written before that column
   * existed, the `userId` of their payload). Upstream deliveries carry no user the spec shows, so none is the
   * user's. Answers how many events went.
   */
  async removeUser(manager: EntityManager, tenantId: string, userId: string): Promise<number> {
    const [{ n }] = (await manager.query(
      `WITH doomed AS (
         SELECT id, received_at FROM events
          WHERE tenant_id = $1 AND source = 'service'
            AND (user_id = $2 OR (user_id IS NULL AND payload->>'userId' = $2))
          FOR UPDATE),
       attempts AS (
         DELETE FROM event_attempts a
          WHERE a.event_id IN (SELECT id FROM doomed) AND a.at >= (SELECT min(received_at) FROM doomed)),
       gone AS (
         DELETE FROM events e USING doomed d WHERE e.id = d.id AND e.received_at = d.received_at RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [tenantId, userId],
    )) as Array<{ n: number }>;
    return n;
  }
}
