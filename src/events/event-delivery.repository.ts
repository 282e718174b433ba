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

  /** The tenant's eventsTargetUrl was removed while the event waited. */
  async markNoTarget(id: string): Promise<void> {
    await this.db.query(
      `UPDATE events SET delivery_state = 'no_target', next_attempt_at = NULL WHERE id = $1 AND delivery_state = 'pending'`,
      [id],
    );
  }
}
