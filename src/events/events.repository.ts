import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type pg from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { v7 as timeOrderedUuid } from 'uuid';
import { Clock } from '../common/clock.js';
import { preparedQuery } from '../database/pg-pool.js';
import { currentTraceparent } from '../telemetry/operation-spans.js';

export type EventSource = 'upstream' | 'service';
export type DeliveryState = 'pending' | 'delivered' | 'dead' | 'no_target' | 'filtered';

export interface NewEvent {
  tenantId: string;
  source: EventSource;
  type: string;
  payload: unknown;
  /** `payload` as the JSON text it was parsed from (one JSON value, already checked): stored as is, not encoded again. */
  payloadJson?: string;
  receiverId?: string | null;
  /** The trace that received or created it (telemetry/operation-spans.ts); `record` takes the one in progress. */
  traceparent?: string | null;
  /** The partner's end user it is about (a user connection's events), for erasure; null: nobody's. */
  userId?: string | null;
  /** An upstream delivery's SHA-256 (base64url) of its body as received; null for the service's own events. */
  payloadDigest?: string | null;
}

/**
 * Where an event stands in the events API's order: its writer's transaction id, then its seq. Rows are
 * read only below the oldest writer still open (`listAfter`), so no row can later appear before a
 * position already read.
 */
export interface EventPosition {
  /** The xid8 of the transaction that inserted it, as decimal text ('0' for rows older than the column). */
  writerXid: string;
  seq: number;
}

export interface StoredEvent {
  seq: number;
  writerXid: string;
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
  /** When its current delivery began (a redelivery restarts the retry span); null: at receipt. */
  retryFrom: Date | null;
  /** W3C trace context of the operation that received or created it; null when tracing was off. */
  traceparent: string | null;
  payloadDigest: string | null;
}

/**
 * The events table's rows: recording events (one, or a group commit of inbound deliveries) and reading them
 * back in the events API's order. Where a delivery stands is event-delivery.repository.ts's, a redelivery
 * event-redelivery.repository.ts's, removals events-removal.repository.ts's.
 */
@Injectable()
export class EventsRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly clock: Clock,
  ) {}

  /**
   * Records an event. Pass the transaction's manager when the event belongs to a state change, so that
   * both commit together (or neither does).
   */
  async record(event: NewEvent, manager?: EntityManager): Promise<void> {
    // Time-ordered, like inbound ids: an id names its time, so a redelivery of one past every window is 410.
    const id = timeOrderedUuid();
    const stored = await this.insert(manager ?? this.db.manager, [
      { ...event, id, traceparent: event.traceparent ?? currentTraceparent() },
    ]);
    if (!stored.has(id)) throw new Error('event for an unknown tenant');
  }

  /**
   * Records several events in one statement (group commit of inbound deliveries), in the given order.
   * Answers the ids stored, each with its delivery state: an event whose tenant no longer exists is left out.
   */
  async recordMany(events: Array<NewEvent & { id: string }>): Promise<Map<string, DeliveryState>> {
    // A named prepared statement: each pooled connection parses and plans it once, not once per group.
    const rows = await preparedQuery<{ id: string; delivery_state: DeliveryState }>(this.db, {
      name: 'cws_events_record_2',
      text: INSERT_EVENTS,
      values: insertParams(events, this.clock.now()),
    });
    return new Map(rows.map((r) => [r.id, r.delivery_state]));
  }

  private async insert(runner: EntityManager, events: Array<NewEvent & { id: string }>): Promise<Map<string, DeliveryState>> {
    const rows = (await runner.query(INSERT_EVENTS, insertParams(events, this.clock.now()))) as Array<{
      id: string;
      delivery_state: DeliveryState;
    }>;
    return new Map(rows.map((r) => [r.id, r.delivery_state]));
  }

  /**
   * A page of the tenant's events after `after` in (writer_xid, seq) order, only from transactions that
   * can no longer add a row before it: writer_xid below the statement snapshot's oldest transaction still
   * in progress (`pg_snapshot_xip`), or below its xmax when none is. Every transaction that has not
   * finished has a writer_xid at or above that mark, and every later one above it, so a row committed
   * after this read sorts after everything it returned: groups of deliveries may commit in any order.
   * A transaction of another database (running now, per pg_stat_activity) can write no row here and does
   * not hold the mark back; one whose database is unknown (it ended meanwhile) does, for this read only.
   * The page is the function cws_events_page (migration EventsPageFunction), planned once per connection.
   */
  async listAfter(tenantId: string, after: EventPosition, limit: number, keptSince: Date): Promise<StoredEvent[]> {
    return (await preparedQuery(this.db, this.listAfterQuery(tenantId, after, limit, keptSince))).map(toEvent);
  }

  /** listAfter's statement (a named prepared statement) with its values. */
  listAfterQuery(tenantId: string, after: EventPosition, limit: number, keptSince: Date): pg.QueryConfig {
    return { name: 'cws_events_page', text: LIST_AFTER, values: [tenantId, after.writerXid, after.seq, limit, keptSince] };
  }

  async findInAnyTenant(id: string): Promise<StoredEvent | null> {
    const rows = await preparedQuery(this.db, {
      name: 'cws_events_by_id',
      text: `SELECT ${EVENT_COLUMNS} FROM events WHERE id = $1`,
      values: [id],
    });
    return rows[0] ? toEvent(rows[0]) : null;
  }
}

/**
 * The columns toEvent reads, named: a prepared `SELECT *` would fail once a later release's migration adds a column
 * ("cached plan must not change result type") while this one still runs.
 */
export const EVENT_COLUMNS = `seq, writer_xid, id, tenant_id, source, receiver_id, type, payload, received_at, delivery_state, delivery_attempts,
  last_delivery_error, delivered_at, retry_from, traceparent, payload_digest`;

/** listAfter's page: the function cws_events_page (migration EventsPageFunction, which says why a function). */
const LIST_AFTER = `SELECT ${EVENT_COLUMNS} FROM cws_events_page($1::text, $2::xid8, $3::bigint, $4::integer, $5::timestamptz)`;

/**
 * Inserts events in the given order, received at $8 (the service's clock: the day partition it lands in); a row
 * whose tenant no longer exists or is deleted is left out (the join).
 */
const INSERT_EVENTS = `INSERT INTO events (id, tenant_id, source, receiver_id, type, payload, traceparent, user_id, payload_digest, received_at, delivery_state, next_attempt_at)
  SELECT v.id, v.tenant_id, v.source, v.receiver_id, v.type, p.payload, v.traceparent, v.user_id, v.payload_digest, $8::timestamptz,
         CASE WHEN t.events_target_url IS NULL OR t.events_target_disabled THEN 'no_target'
              WHEN t.event_types IS NOT NULL AND NOT (t.event_types ? v.type) THEN 'filtered'
              ELSE 'pending' END, now()
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::text[], $9::text[], $10::text[])
         WITH ORDINALITY AS v(id, tenant_id, source, receiver_id, type, traceparent, user_id, payload_digest, ord)
    JOIN jsonb_array_elements($7::jsonb) WITH ORDINALITY AS p(payload, ord) ON p.ord = v.ord
    JOIN tenants t ON t.id = v.tenant_id AND t.deleted_at IS NULL
   ORDER BY v.ord
  RETURNING id, delivery_state`;

/** When a time-ordered (v7) id was minted; null for any other id. */
export function timeOfId(id: string): Date | null {
  const hex = id.replaceAll('-', '');
  if (!/^[0-9a-f]{12}7[0-9a-f]{19}$/i.test(hex)) return null;
  return new Date(parseInt(hex.slice(0, 12), 16));
}

function insertParams(events: Array<NewEvent & { id: string }>, receivedAt: Date): unknown[] {
  return [
    events.map((e) => e.id),
    events.map((e) => e.tenantId),
    events.map((e) => e.source),
    events.map((e) => e.receiverId ?? null),
    events.map((e) => e.type),
    events.map((e) => e.traceparent ?? null),
    // One JSON array of the payloads: no array-literal escaping of every payload's quotes on the way.
    `[${events.map((e) => e.payloadJson ?? JSON.stringify(e.payload ?? null)).join(',')}]`,
    receivedAt,
    events.map((e) => e.userId ?? null),
    events.map((e) => e.payloadDigest ?? null),
  ];
}

export function toEvent(r: Record<string, unknown>): StoredEvent {
  return {
    seq: Number(r.seq),
    writerXid: String(r.writer_xid),
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
    retryFrom: (r.retry_from as Date | null) ?? null,
    traceparent: (r.traceparent as string | null) ?? null,
    payloadDigest: (r.payload_digest as string | null) ?? null,
  };
}
