import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { type DeliveryState, timeOfId } from './events.repository.js';

/** The states a bulk redelivery may pick: everything that is not on its way already. */
export const REDELIVERABLE_STATES = ['dead', 'delivered', 'no_target'] as const;

/** The partner's redeliveries: an event, or a span of them, made pending again with a fresh retry span. */
@Injectable()
export class EventRedeliveryRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Delivers one of the tenant's events again (same id, so the partner can de-duplicate): it becomes pending,
   * with a fresh retry span, and the relay queues it. An event on its way already is left as it is.
   * Answers `queued`, `pending` (on its way already), `expired` (received before `keptSince`: kept no longer,
   * whether or not its row is removed yet, or an id whose time is before it) or `unknown`.
   */
  async redeliverOne(tenantId: string, eventId: string, keptSince: Date): Promise<'queued' | 'pending' | 'expired' | 'unknown'> {
    const [rows] = (await this.db.query(
      `UPDATE events e SET delivery_state = 'pending', enqueued_at = NULL, next_attempt_at = now(), retry_from = now()
        WHERE e.tenant_id = $1 AND e.id = $2 AND e.delivery_state <> 'pending' AND e.received_at >= $3
        RETURNING e.id`,
      [tenantId, eventId, keptSince],
    )) as [Array<{ id: string }>, number];
    if (rows.length === 1) return 'queued';
    const found = (await this.db.query(`SELECT received_at FROM events WHERE tenant_id = $1 AND id = $2`, [tenantId, eventId])) as Array<{
      received_at: Date;
    }>;
    if (found[0]) return found[0].received_at < keptSince ? 'expired' : 'pending';
    const minted = timeOfId(eventId);
    return minted !== null && minted < keptSince ? 'expired' : 'unknown';
  }

  /**
   * Delivers again the tenant's events received since `since` in one of `states`, oldest first, at most
   * `max` of them and never more than leaves the tenant `maxPending` events waiting in all. One statement:
   * two concurrent calls cannot both fill the same room. Answers how many were queued and how many matched
   * but did not fit.
   */
  async redeliverSince(
    tenantId: string,
    since: Date,
    states: readonly DeliveryState[],
    max: number,
    maxPending: number,
    keptSince: Date,
  ): Promise<{ queued: number; left: number }> {
    if (since < keptSince) since = keptSince;
    return this.db.transaction(async (m) => {
      // Serialises bulk redeliveries of one tenant, so the room computed below is not spent twice.
      await m.query(`SELECT pg_advisory_xact_lock(hashtextextended('events-redeliver:' || $1, 0))`, [tenantId]);
      const [{ pending }] = (await m.query(
        `SELECT count(*)::int AS pending FROM events WHERE tenant_id = $1 AND delivery_state = 'pending'`,
        [tenantId],
      )) as Array<{ pending: number }>;
      const room = Math.max(0, Math.min(max, maxPending - pending));
      const [{ matching }] = (await m.query(
        `SELECT count(*)::int AS matching FROM events WHERE tenant_id = $1 AND received_at >= $2 AND delivery_state = ANY($3::text[])`,
        [tenantId, since, states],
      )) as Array<{ matching: number }>;
      if (room === 0 || matching === 0) return { queued: 0, left: matching };
      const [rows] = (await m.query(
        `UPDATE events e SET delivery_state = 'pending', enqueued_at = NULL, next_attempt_at = now(), retry_from = now()
          WHERE e.id IN (SELECT id FROM events
                          WHERE tenant_id = $1 AND received_at >= $2 AND delivery_state = ANY($3::text[])
                          ORDER BY received_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED)
          RETURNING e.id`,
        [tenantId, since, states, room],
      )) as [Array<{ id: string }>, number];
      return { queued: rows.length, left: matching - rows.length };
    });
  }
}
