import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

export type EventSource = 'upstream' | 'service';
export type DeliveryState = 'pending' | 'delivered' | 'dead' | 'no_target';

export interface NewEvent {
  tenantId: string;
  source: EventSource;
  type: string;
  payload: unknown;
  receiverId?: string | null;
}

export interface StoredEvent {
  seq: number;
  id: string;
  tenantId: string;
  source: EventSource;
  receiverId: string | null;
  type: string;
  payload: unknown;
  receivedAt: Date;
  deliveryState: DeliveryState;
  deliveryAttempts: number;
  lastDeliveryError: string | null;
  deliveredAt: Date | null;
}

@Injectable()
export class EventsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Records an event. Pass the transaction's manager when the event belongs to a state change, so that
   * both commit together (or neither does).
   */
  async record(event: NewEvent, manager?: EntityManager): Promise<StoredEvent> {
    const runner = manager ?? this.db.manager;
    const rows = (await runner.query(
      `INSERT INTO events (id, tenant_id, source, receiver_id, type, payload, delivery_state, next_attempt_at)
       SELECT $1, $2, $3, $4, $5, $6::jsonb,
              CASE WHEN t.events_target_url IS NULL THEN 'no_target' ELSE 'pending' END, now()
         FROM tenants t WHERE t.id = $2
       RETURNING *`,
      [randomUUID(), event.tenantId, event.source, event.receiverId ?? null, event.type, JSON.stringify(event.payload ?? null)],
    )) as Array<Record<string, unknown>>;
    if (!rows[0]) throw new Error('event for an unknown tenant');
    return toEvent(rows[0]);
  }

  async listAfter(tenantId: string, afterSeq: number, limit: number): Promise<StoredEvent[]> {
    const rows = (await this.db.query(`SELECT * FROM events WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [tenantId, afterSeq, limit])) as Array<Record<string, unknown>>;
    return rows.map(toEvent);
  }
}

export function toEvent(r: Record<string, unknown>): StoredEvent {
  return {
    seq: Number(r.seq),
    id: r.id as string,
    tenantId: r.tenant_id as string,
    source: r.source as EventSource,
    receiverId: (r.receiver_id as string | null) ?? null,
    type: r.type as string,
    payload: r.payload,
    receivedAt: r.received_at as Date,
    deliveryState: r.delivery_state as DeliveryState,
    deliveryAttempts: Number(r.delivery_attempts),
    lastDeliveryError: (r.last_delivery_error as string | null) ?? null,
    deliveredAt: (r.delivered_at as Date | null) ?? null,
  };
}
