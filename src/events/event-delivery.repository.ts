import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { LOCKS, withAdvisoryLock } from '../database/advisory-lock.js';

/** One delivery attempt as the partner may see it: never a body, a header or a URL. */
export interface DeliveryAttempt {
  at: Date;
  /** The target's HTTP status; null when none came (timeout, network error). */
  status: number | null;
  durationMs: number;
  /** null on success; else `timeout`, `network` or `http_<status>`. */
  error: string | null;
}

/** What the fence needs of an event: its id, and its receipt time (the one partition its row is in). */
export interface EventRow {
  id: string;
  receivedAt: Date;
}

/** What an attempt makes of its event. */
export type Outcome =
  | { kind: 'delivered' }
  | { kind: 'dead'; error: string }
  | { kind: 'no_target' }
  /** Failed: counted, retried at `next`; `schedule` queues that attempt in the recording transaction. */
  | { kind: 'retry'; error: string; next: Date; schedule: (sql: SqlExecutor) => Promise<void> };

export type Finished = 'recorded' | 'lost' | 'gone';

/**
 * The row by its id within its receipt time's millisecond (the driver reads timestamps to the millisecond), so
 * that a statement touches the one day partition it is in rather than probing every partition's index.
 */
const AT_RECEIPT = `received_at >= $2::timestamptz - interval '1 millisecond' AND received_at < $2::timestamptz + interval '1 millisecond'`;

/** The SET list of an outcome, and its parameters from $4 on (attempt `$3` is 0-based). */
function changeOf(o: Outcome): [string, unknown[]] {
  switch (o.kind) {
    case 'delivered':
      return [
        `delivery_state = 'delivered', delivered_at = now(), delivery_attempts = GREATEST(delivery_attempts, $3::int + 1), last_delivery_error = NULL, next_attempt_at = NULL`,
        [],
      ];
    case 'dead':
      return [
        `delivery_state = 'dead', delivery_attempts = $3::int + 1, last_delivery_error = $4, next_attempt_at = NULL`,
        [o.error.slice(0, 500)],
      ];
    case 'no_target':
      return [`delivery_state = 'no_target', next_attempt_at = NULL`, []];
    case 'retry':
      return [`delivery_attempts = $3::int + 1, last_delivery_error = $4, next_attempt_at = $5`, [o.error.slice(0, 500), o.next]];
  }
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

/**
 * Where each event's delivery stands (the events table's delivery columns) and its attempts log
 * (event_attempts): the outbox relay into the job queue, each attempt's outcome, and what the partner reads
 * of them. Written by the delivery worker (event-delivery.service.ts) only.
 */
/**
 * Health figures (docs/endpoints.md, "Health") read at most this many of the latest events' attempts: a GET costs the
 * same however busy the endpoint is.
 */
export const HEALTH_SAMPLE = 10_000;

@Injectable()
export class EventDeliveryRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Runs the job queue's schema set-up one instance at a time (pg-boss deadlocks when two start together). */
  withQueueSetupLock<T>(work: () => Promise<T>): Promise<T> {
    return withAdvisoryLock(this.db, LOCKS.jobQueueSetup, work);
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

  /**
   * The fence (docs/webhooks.md, "One attempt at a time"): claims attempt `attempt` of the event before anything is
   * forwarded, when it is still pending at that attempt and no other attempt's lease runs: the fence goes up by one
   * and the lease runs `leaseMs` from now (the database's clock). When another attempt's lease runs, lets `defer`
   * queue the job again for when it ends, in the same transaction (should that attempt never be recorded, this job
   * takes over then). Answers the fence, `held`, or null when the event is gone or has moved on.
   */
  async claim(
    event: EventRow,
    attempt: number,
    leaseMs: number,
    defer: (until: Date, sql: SqlExecutor) => Promise<void>,
  ): Promise<{ fence: string } | 'held' | null> {
    return this.db.transaction(async (m) => {
      const rows = (await m.query(
        `SELECT delivery_lease_until AS until, delivery_lease_until > now() AS held FROM events
          WHERE id = $1 AND ${AT_RECEIPT} AND delivery_state = 'pending' AND delivery_attempts = $3 FOR UPDATE`,
        [event.id, event.receivedAt, attempt],
      )) as Array<{ until: Date | null; held: boolean | null }>;
      if (rows.length === 0) return null;
      if (rows[0].held && rows[0].until) {
        await defer(rows[0].until, executorOf(m));
        return 'held';
      }
      const [claimed] = (await m.query(
        `UPDATE events SET delivery_fence = delivery_fence + 1, delivery_lease_until = now() + $3 * interval '1 millisecond'
          WHERE id = $1 AND ${AT_RECEIPT} RETURNING delivery_fence::text AS fence`,
        [event.id, event.receivedAt, leaseMs],
      )) as [Array<{ fence: string }>, number];
      return { fence: claimed[0].fence };
    });
  }

  /**
   * Records the attempt that claimed the event under `fence`, in one transaction on the locked row: its attempts
   * log entry (`log`; none when nothing was sent) and the event's new state, which releases the lease. A failure
   * lets `outcome.schedule` queue the next attempt in the same transaction. Answers `recorded`; `lost` when another
   * attempt claimed the event meanwhile (this one outlived its lease: only its log entry is kept, and a success
   * still marks the event delivered); `gone` when the event was removed meanwhile (an erasure, a retention
   * sweep): then nothing is written, so no attempt outlives its event.
   */
  async finish(event: EventRow, attempt: number, fence: string, log: DeliveryAttempt | null, outcome: Outcome): Promise<Finished> {
    return this.db.transaction(async (m) => {
      const rows = (await m.query(`SELECT delivery_fence::text AS fence FROM events WHERE id = $1 AND ${AT_RECEIPT} FOR UPDATE`, [
        event.id,
        event.receivedAt,
      ])) as Array<{ fence: string }>;
      if (rows.length === 0) return 'gone';
      if (log)
        await m.query(`INSERT INTO event_attempts (event_id, at, status, duration_ms, error) VALUES ($1, $2, $3, $4, $5)`, [
          event.id,
          log.at,
          log.status,
          log.durationMs,
          log.error,
        ]);
      const mine = rows[0].fence === fence;
      if (!mine && outcome.kind !== 'delivered') return 'lost';
      const [set, extra] = changeOf(outcome);
      // A success counts whatever attempt it was (a late one included); anything else only for the attempt it was.
      const [, changed] = (await m.query(
        `UPDATE events SET ${set}${mine ? ', delivery_lease_until = NULL' : ''}
          WHERE id = $1 AND ${AT_RECEIPT} AND delivery_state = 'pending'${outcome.kind === 'delivered' ? '' : ' AND delivery_attempts = $3'}`,
        [event.id, event.receivedAt, attempt, ...extra],
      )) as [unknown, number];
      if (changed === 1 && outcome.kind === 'retry') await outcome.schedule(executorOf(m));
      if (changed === 0 && mine)
        await m.query(`UPDATE events SET delivery_lease_until = NULL WHERE id = $1 AND ${AT_RECEIPT}`, [event.id, event.receivedAt]);
      return mine ? 'recorded' : 'lost';
    });
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
   * The eventsTargetUrl's health figures (docs/endpoints.md): its attempts of the last 24 h (events received within
   * the last 24 h plus the retry span, the latest HEALTH_SAMPLE of them at most), and the tenant's events waiting for it.
   */
  async targetHealth(
    tenantId: string,
    retrySpanMs: number,
  ): Promise<{ attempts24h: number; succeeded24h: number; p99Ms24h: number | null; pending: number; oldestPendingSeconds: number }> {
    const [a] = (await this.db.query(
      `SELECT count(*)::int AS attempts, count(*) FILTER (WHERE a.error IS NULL)::int AS ok,
              percentile_disc(0.99) WITHIN GROUP (ORDER BY a.duration_ms) AS p99
         FROM (SELECT id FROM events WHERE tenant_id = $1 AND received_at >= now() - interval '24 hours' - $2 * interval '1 millisecond'
                ORDER BY received_at DESC LIMIT $3) e
         JOIN event_attempts a ON a.event_id = e.id AND a.at >= now() - interval '24 hours'`,
      [tenantId, retrySpanMs, HEALTH_SAMPLE],
    )) as Array<{ attempts: number; ok: number; p99: number | null }>;
    const [p] = (await this.db.query(
      `SELECT count(*)::int AS pending, coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 AS oldest
         FROM events WHERE tenant_id = $1 AND delivery_state = 'pending'`,
      [tenantId],
    )) as Array<{ pending: number; oldest: number }>;
    return {
      attempts24h: a.attempts,
      succeeded24h: a.ok,
      p99Ms24h: a.p99 === null ? null : Number(a.p99),
      pending: p.pending,
      oldestPendingSeconds: Math.max(0, Math.floor(Number(p.oldest))),
    };
  }
}
