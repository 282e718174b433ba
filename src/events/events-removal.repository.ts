import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/** How long a sweep batch may wait for a row lock or run at all: it never holds locks anyone waits on for long. */
const BATCH_LOCK_TIMEOUT = '1s';
const BATCH_STATEMENT_TIMEOUT = '5s';

/**
 * The row-by-row removals of the events table and of its attempts (the day partitions themselves are
 * dropped by `EventPartitions`): a tenant's events past a window shorter than the partitions', a deleted
 * tenant's events, and an erased user's. Reads and writes of events are `EventsRepository`'s and the delivery
 * repositories' (event-delivery.repository.ts, event-redelivery.repository.ts).
 */
@Injectable()
export class EventsRemoval {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Removes up to `limit` of the tenant's events received before `before` (null: all of them) and their
   * attempts, in one short transaction: rows another transaction holds are skipped (SKIP LOCKED) and taken by
   * a later batch. Answers how many events went.
   */
  async removeSomeOfTenant(tenantId: string, before: Date | null, limit: number): Promise<number> {
    return this.db.transaction(async (m) => {
      await m.query(`SET LOCAL lock_timeout = '${BATCH_LOCK_TIMEOUT}'`);
      await m.query(`SET LOCAL statement_timeout = '${BATCH_STATEMENT_TIMEOUT}'`);
      const rows = (await m.query(
        `SELECT id, received_at FROM events
          WHERE tenant_id = $1 AND received_at < $2
          ORDER BY received_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [tenantId, before ?? INFINITY, limit],
      )) as Doomed[];
      return removeRows(m, rows);
    });
  }

  /**
   * Removes, in the caller's transaction, every event attributed to the tenant's end user and their attempts:
   * the service's own events about the user's connections (`user_id`, or for rows written before that column
   * existed, the `userId` of their payload). Upstream deliveries carry no user the spec shows, so none is the
   * user's. Answers how many events went.
   */
  async removeOfUser(manager: EntityManager, tenantId: string, userId: string): Promise<number> {
    const rows = (await manager.query(
      `SELECT id, received_at FROM events
        WHERE tenant_id = $1 AND source = 'service'
          AND (user_id = $2 OR (user_id IS NULL AND payload->>'userId' = $2))
        FOR UPDATE`,
      [tenantId, userId],
    )) as Doomed[];
    return removeRows(manager, rows);
  }
}

interface Doomed {
  id: string;
  received_at: Date;
}

const INFINITY = 'infinity';

/**
 * Deletes the given events and their attempts. The receipt times bound both statements, so each touches only
 * the partitions those days are in (pruned when planned), never every partition: the cost is the batch's, not
 * the table's. An attempt is never older than its event.
 */
async function removeRows(m: EntityManager, rows: Doomed[]): Promise<number> {
  if (rows.length === 0) return 0;
  const ids = rows.map((r) => r.id);
  const times = rows.map((r) => r.received_at.getTime());
  const from = new Date(Math.min(...times));
  const to = new Date(Math.max(...times));
  await m.query(`DELETE FROM event_attempts WHERE event_id = ANY($1::uuid[]) AND at >= $2`, [ids, from]);
  const [, n] = (await m.query(`DELETE FROM events WHERE id = ANY($1::uuid[]) AND received_at BETWEEN $2 AND $3`, [ids, from, to])) as [
    unknown,
    number,
  ];
  return n;
}
