import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { v7 as timeOrderedUuid } from 'uuid';
import { Clock } from '../common/clock.js';
import { LOCKS, withAdvisoryLock } from '../database/advisory-lock.js';
import { preparedQuery } from '../database/pg-pool.js';
import { currentTraceparent } from '../ops/tracing.js';

export type EventSource = 'upstream' | 'service';
export type DeliveryState = 'pending' | 'delivered' | 'dead' | 'no_target' | 'filtered';

/** One delivery attempt as the partner may see it: never a body, a header or a URL. */
export interface DeliveryAttempt {
  at: Date;
  /** The target's HTTP status; null when none came (timeout, network error). */
  status: number | null;
  durationMs: number;
  /** null on success; else `timeout`, `network` or `http_<status>`. */
  error: string | null;
}

/** The states a bulk redelivery may pick: everything that is not on its way already. */
export const REDELIVERABLE_STATES = ['dead', 'delivered', 'no_target'] as const;

export interface NewEvent {
  tenantId: string;
  source: EventSource;
  type: string;
  payload: unknown;
  /** `payload` as the JSON text it was parsed from (one JSON value, already checked): stored as is, not encoded again. */
  payloadJson?: string;
  receiverId?: string | null;
  /** The trace that received or created it (ops/tracing.ts); `record` takes the one in progress. */
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

@Injectable()
export class EventsRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly clock: Clock,
  ) {}

  /** Runs the job queue's schema set-up one instance at a time (pg-boss deadlocks when two start together). */
  withQueueSetupLock<T>(work: () => Promise<T>): Promise<T> {
    return withAdvisoryLock(this.db, LOCKS.jobQueueSetup, work);
  }

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
   */
  async listAfter(tenantId: string, after: EventPosition, limit: number, keptSince: Date): Promise<StoredEvent[]> {
    const rows = (await this.db.query(
      `SELECT e.* FROM events e
        WHERE e.tenant_id = $1 AND (e.writer_xid, e.seq) > ($2::xid8, $3::bigint) AND e.received_at >= $5
          AND e.writer_xid < (
            SELECT LEAST(pg_snapshot_xmax(s), (
                     SELECT min(x) FROM pg_snapshot_xip(s) x
                      WHERE x::text::bigint % 4294967296 NOT IN (
                              SELECT a.backend_xid::text::bigint FROM pg_stat_activity a
                               WHERE a.backend_xid IS NOT NULL AND a.datname <> current_database())))
              FROM pg_current_snapshot() s)
        ORDER BY e.writer_xid, e.seq LIMIT $4`,
      [tenantId, after.writerXid, after.seq, limit, keptSince],
    )) as Array<Record<string, unknown>>;
    return rows.map(toEvent);
  }

  async getById(id: string): Promise<StoredEvent | null> {
    const rows = (await this.db.query(`SELECT * FROM events WHERE id = $1`, [id])) as Array<Record<string, unknown>>;
    return rows[0] ? toEvent(rows[0]) : null;
  }

  /**
   * The outbox relay: claims up to `limit` pending events not handed to the job queue yet (SKIP LOCKED,
   * so instances share the work) and lets `enqueue` insert their jobs through the same transaction, so
   * an event is marked enqueued exactly when its job exists. Returns how many were claimed.
   */
  async relayUnqueued(limit: number, enqueue: (events: UnqueuedEvent[], sql: SqlExecutor) => Promise<void>): Promise<number> {
    return this.db.transaction(async (m) => {
      const rows = (await m.query(
        `SELECT id, delivery_attempts, next_attempt_at FROM events
          WHERE delivery_state = 'pending' AND enqueued_at IS NULL
          ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [limit],
      )) as Array<{ id: string; delivery_attempts: number; next_attempt_at: Date | null }>;
      if (rows.length === 0) return 0;
      await enqueue(
        rows.map((r) => ({ id: r.id, attempt: Number(r.delivery_attempts), notBefore: r.next_attempt_at })),
        executorOf(m),
      );
      await m.query(`UPDATE events SET enqueued_at = now() WHERE id = ANY($1::uuid[])`, [rows.map((r) => r.id)]);
      return rows.length;
    });
  }

  /** Attempt `attempt` (0-based) succeeded. */
  async markDelivered(id: string, attempt: number): Promise<void> {
    await this.db.query(
      `UPDATE events SET delivery_state = 'delivered', delivered_at = now(), delivery_attempts = GREATEST(delivery_attempts, $2), last_delivery_error = NULL, next_attempt_at = NULL
        WHERE id = $1 AND delivery_state = 'pending'`,
      [id, attempt + 1],
    );
  }

  /**
   * Attempt `attempt` failed: counts it and, in the same transaction, lets `schedule` queue the next
   * attempt. Returns false (and schedules nothing) when another run already counted this attempt.
   */
  async recordFailure(
    id: string,
    attempt: number,
    error: string,
    nextAttemptAt: Date,
    schedule: (sql: SqlExecutor) => Promise<void>,
  ): Promise<boolean> {
    return this.db.transaction(async (m) => {
      const rows = (await m.query(
        `UPDATE events SET delivery_attempts = $2 + 1, last_delivery_error = $3, next_attempt_at = $4
          WHERE id = $1 AND delivery_state = 'pending' AND delivery_attempts = $2 RETURNING id`,
        [id, attempt, error.slice(0, 500), nextAttemptAt],
      )) as [Array<{ id: string }>, number];
      if (rows[1] !== 1) return false;
      await schedule(executorOf(m));
      return true;
    });
  }

  /** The last attempt failed and the retry span is over: dead-lettered, kept and listed with this state. */
  async markDead(id: string, attempt: number, error: string): Promise<void> {
    await this.db.query(
      `UPDATE events SET delivery_state = 'dead', delivery_attempts = $2 + 1, last_delivery_error = $3, next_attempt_at = NULL
        WHERE id = $1 AND delivery_state = 'pending' AND delivery_attempts = $2`,
      [id, attempt, error.slice(0, 500)],
    );
  }

  /** Keeps one delivery attempt in the event's attempts log. */
  async recordAttempt(eventId: string, a: DeliveryAttempt): Promise<void> {
    await this.db.query(`INSERT INTO event_attempts (event_id, at, status, duration_ms, error) VALUES ($1, $2, $3, $4, $5)`, [
      eventId,
      a.at,
      a.status,
      a.durationMs,
      a.error,
    ]);
  }

  /** The attempts of one of the tenant's events kept since `keptSince`, oldest first; null when the tenant has no such event. */
  async listAttempts(tenantId: string, eventId: string, keptSince: Date): Promise<DeliveryAttempt[] | null> {
    const rows = (await this.db.query(
      `SELECT e.id AS event_id, a.at, a.status, a.duration_ms, a.error
         FROM events e LEFT JOIN event_attempts a ON a.event_id = e.id AND a.at >= e.received_at
        WHERE e.tenant_id = $1 AND e.id = $2 AND e.received_at >= $3
        ORDER BY a.id`,
      [tenantId, eventId, keptSince],
    )) as Array<{ at: Date | null; status: number | null; duration_ms: number | null; error: string | null }>;
    if (rows.length === 0) return null;
    return rows
      .filter((r) => r.at !== null)
      .map((r) => ({ at: r.at!, status: r.status, durationMs: Number(r.duration_ms), error: r.error }));
  }

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

  /** The tenant's eventsTargetUrl was removed while the event waited. */
  async markNoTarget(id: string): Promise<void> {
    await this.db.query(
      `UPDATE events SET delivery_state = 'no_target', next_attempt_at = NULL WHERE id = $1 AND delivery_state = 'pending'`,
      [id],
    );
  }
}

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

export interface UnqueuedEvent {
  id: string;
  /** Attempts already made (the job carries it, so a stale or repeated job can tell). */
  attempt: number;
  notBefore: Date | null;
}

/** pg-boss's `db` option: lets it run its SQL inside one of our transactions. */
export interface SqlExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

function executorOf(m: EntityManager): SqlExecutor {
  const runner = m.queryRunner;
  if (!runner) throw new Error('a transaction manager without a query runner');
  return {
    executeSql: async (text, values) => ({ rows: ((await runner.query(text, values, true)) as { records?: unknown[] }).records ?? [] }),
  };
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
