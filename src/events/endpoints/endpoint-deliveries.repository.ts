import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { HEALTH_SAMPLE } from '../event-delivery.repository.js';
import { EVENT_COLUMNS, type StoredEvent, toEvent } from '../events.repository.js';
import { ENDPOINT_COLUMNS, type EndpointRow, toEndpoint } from './endpoint.js';

/** An event to fan out to the tenant's added endpoints (what the fan-out needs of it). */
export interface FanoutEvent {
  id: string;
  tenantId: string;
  type: string;
  payload: unknown;
  receivedAt: Date;
}

export interface NewDelivery {
  endpointId: string;
  eventId: string;
  tenantId: string;
  receivedAt: Date;
  /** `pending`, or `missed` for an endpoint disabled at the time. */
  state: 'pending' | 'missed';
}

/** One claimed attempt: the delivery row's fence is `fence` until it is recorded. */
export interface ClaimedDelivery {
  endpointId: string;
  eventId: string;
  receivedAt: Date;
  attempts: number;
  fence: string;
  retryFrom: Date;
  firstFailedAt: Date | null;
  /** When the attempt starts as the rate limit's log counts it (the database's clock): now, or a planned start. */
  startedAt: Date;
  /** How long to wait before sending: a rate-limited endpoint's planned start (at most a second), else 0. */
  startDelayMs: number;
  /** The endpoint as the claim read it (its row locked), and the event; null when the event is gone. */
  endpoint: EndpointRow;
  event: StoredEvent | null;
}

export type EndpointDeliveryState = 'pending' | 'delivered' | 'failed' | 'missed';

export interface EndpointAttempt {
  at: Date;
  status: number | null;
  durationMs: number;
  error: string | null;
}

export interface HealthFigures {
  attempts24h: number;
  succeeded24h: number;
  p99Ms24h: number | null;
  pending: number;
  oldestPendingSeconds: number;
}

/**
 * Where each event's delivery to each added endpoint stands (endpoint_deliveries), their attempts
 * (endpoint_attempts), the per-endpoint sliding log of attempt starts (endpoint_rate_log) and the fan-out outbox
 * (endpoint_fanout): docs/endpoints.md.
 */
@Injectable()
export class EndpointDeliveriesRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * The fan-out: takes up to `limit` events from the outbox (SKIP LOCKED: instances share it), lets `plan` say
   * which endpoint takes which (it reads the endpoints in this transaction), and writes every delivery of every
   * event in one multi-row INSERT in the same transaction that empties the outbox. Answers how many outbox rows it
   * took (an event removed meanwhile is dropped from it) and how many deliveries it wrote.
   */
  async fanOut(
    limit: number,
    plan: (m: EntityManager, events: FanoutEvent[]) => Promise<NewDelivery[]>,
  ): Promise<{ events: number; deliveries: number }> {
    return this.db.transaction(async (m) => {
      // One statement: the receipt times go from the outbox to the join as PostgreSQL holds them (microseconds), never
      // through the driver's millisecond dates; the receipt time keeps the lookup to the event's one partition.
      const events = (await m.query(
        `WITH taken AS (
           DELETE FROM endpoint_fanout WHERE seq IN (SELECT seq FROM endpoint_fanout ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
           RETURNING event_id, received_at)
         SELECT e.id, e.tenant_id, e.type, e.payload, e.received_at, (SELECT count(*) FROM taken)::int AS taken
           FROM taken f JOIN events e ON e.id = f.event_id AND e.received_at = f.received_at`,
        [limit],
      )) as Array<{ id: string; tenant_id: string; type: string; payload: unknown; received_at: Date; taken: number }>;
      if (events.length === 0) return { events: 0, deliveries: 0 };
      const deliveries = await plan(
        m,
        events.map((e) => ({ id: e.id, tenantId: e.tenant_id, type: e.type, payload: e.payload, receivedAt: e.received_at })),
      );
      if (deliveries.length > 0)
        await m.query(
          `INSERT INTO endpoint_deliveries (endpoint_id, event_id, tenant_id, received_at, state)
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::text[])
           ON CONFLICT ON CONSTRAINT pk_endpoint_deliveries DO NOTHING`,
          [
            deliveries.map((d) => d.endpointId),
            deliveries.map((d) => d.eventId),
            deliveries.map((d) => d.tenantId),
            deliveries.map((d) => d.receivedAt),
            deliveries.map((d) => d.state),
          ],
        );
      return { events: events[0].taken, deliveries: deliveries.length };
    });
  }

  /**
   * Claims up to `room` due deliveries over the endpoints that have some (docs/endpoints.md, "Isolation"): each
   * endpoint's row is locked with SKIP LOCKED (an endpoint another instance is claiming for is skipped, never waited
   * for); per endpoint at most maxInFlight deliveries are leased at once over all instances (the leases running
   * are counted in the database), at most rateLimitPerSecond attempts start in any second (the sliding log of
   * planned starts, 1/rate s apart and at most a second ahead: a second's budget is spread, never one burst), and
   * none before its Retry-After floor; nothing for a deleted tenant (its rows go with it). Each claimed delivery's
   * fence goes up and its lease runs `leaseMs`.
   */
  async claim(room: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    if (room <= 0) return [];
    return this.db.transaction(async (m) => {
      const endpoints = (await m.query(
        `SELECT ${ENDPOINT_COLUMNS.replace(/(\w+)/g, 'e.$1')} FROM event_endpoints e
          WHERE NOT e.disabled AND (e.not_before IS NULL OR e.not_before <= clock_timestamp())
            AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = e.tenant_id AND t.deleted_at IS NOT NULL)
            AND EXISTS (SELECT 1 FROM endpoint_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending'
                          AND d.next_attempt_at <= clock_timestamp() AND (d.lease_until IS NULL OR d.lease_until <= clock_timestamp()))
          ORDER BY random() LIMIT 64 FOR UPDATE OF e SKIP LOCKED`,
      )) as Array<Record<string, unknown> & { id: string; max_in_flight: number; rate_limit_per_second: number | null }>;
      const claimed: ClaimedDelivery[] = [];
      for (const e of endpoints) {
        if (claimed.length >= room) break;
        const [{ leased }] = (await m.query(
          `SELECT count(*)::int AS leased FROM endpoint_deliveries WHERE endpoint_id = $1 AND lease_until > clock_timestamp()`,
          [e.id],
        )) as Array<{ leased: number }>;
        let take = Math.min(room - claimed.length, Number(e.max_in_flight) - leased);
        const rate = e.rate_limit_per_second === null ? null : Number(e.rate_limit_per_second);
        let slots: { first: string; intervalUs: number } | null = null;
        if (rate !== null && take > 0) {
          // Paced (GCRA): starts are planned one interval (1/rate s) apart, at most a second ahead, so any second
          // holds at most `rate` of them and a second's budget is never sent in one burst.
          await m.query(`DELETE FROM endpoint_rate_log WHERE endpoint_id = $1 AND at <= clock_timestamp() - interval '1 second'`, [e.id]);
          const intervalUs = Math.ceil(1_000_000 / rate);
          const [plan] = (await m.query(
            `SELECT s.first::text AS first, extract(epoch FROM clock_timestamp() + interval '1 second' - s.first) * 1000000 AS room_us
               FROM (SELECT greatest(clock_timestamp(), max(at) + $2 * interval '1 microsecond') AS first
                       FROM endpoint_rate_log WHERE endpoint_id = $1) s`,
            [e.id, intervalUs],
          )) as Array<{ first: string; room_us: string }>;
          const roomUs = Number(plan.room_us);
          take = Math.min(take, roomUs <= 0 ? 0 : Math.ceil(roomUs / intervalUs));
          slots = { first: plan.first, intervalUs };
        }
        if (take <= 0) continue;
        const [rows] = (await m.query(
          `UPDATE endpoint_deliveries d SET fence = d.fence + 1, lease_until = clock_timestamp() + $3 * interval '1 millisecond'
            WHERE d.endpoint_id = $1 AND d.event_id IN (
              SELECT event_id FROM endpoint_deliveries
               WHERE endpoint_id = $1 AND state = 'pending' AND next_attempt_at <= clock_timestamp()
                 AND (lease_until IS NULL OR lease_until <= clock_timestamp())
               ORDER BY next_attempt_at, received_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING d.event_id, d.received_at, d.attempts, d.fence::text AS fence, d.retry_from, d.first_failed_at,
              d.next_attempt_at, clock_timestamp() AS started_at`,
          // A planned start is at most a second away: the lease covers the wait too.
          [e.id, take, leaseMs + (slots ? 1000 : 0)],
        )) as [
          Array<{
            event_id: string;
            received_at: Date;
            attempts: number;
            fence: string;
            retry_from: Date;
            first_failed_at: Date | null;
            next_attempt_at: Date;
            started_at: Date;
          }>,
          number,
        ];
        if (rows.length === 0) continue;
        const delays = rows.map(() => 0);
        if (slots) {
          rows.sort(
            (x, y) => x.next_attempt_at.getTime() - y.next_attempt_at.getTime() || x.received_at.getTime() - y.received_at.getTime(),
          );
          const planned = (await m.query(
            `INSERT INTO endpoint_rate_log (endpoint_id, at)
               SELECT $1, $2::timestamptz + k * $3 * interval '1 microsecond' FROM generate_series(0, $4 - 1) k
             RETURNING at, greatest(0, extract(epoch FROM at - clock_timestamp()) * 1000)::float8 AS delay_ms`,
            [e.id, slots.first, slots.intervalUs, rows.length],
          )) as Array<{ at: Date; delay_ms: number }>;
          planned.sort((x, y) => x.at.getTime() - y.at.getTime());
          rows.forEach((r, i) => {
            r.started_at = planned[i].at;
            delays[i] = Number(planned[i].delay_ms);
          });
        }
        rows.forEach((r, i) =>
          claimed.push({
            endpointId: e.id,
            eventId: r.event_id,
            receivedAt: r.received_at,
            attempts: Number(r.attempts),
            fence: r.fence,
            retryFrom: r.retry_from,
            firstFailedAt: r.first_failed_at,
            startedAt: r.started_at,
            startDelayMs: delays[i],
            endpoint: toEndpoint(e),
            event: null,
          }),
        );
      }
      if (claimed.length === 0) return claimed;
      // The events, in one statement for the whole claim; the receipt times keep it to their partitions.
      const times = claimed.map((c) => c.receivedAt.getTime());
      const events = (await m.query(
        `SELECT ${EVENT_COLUMNS} FROM events WHERE id = ANY($1::uuid[])
            AND received_at >= $2::timestamptz - interval '1 millisecond' AND received_at < $3::timestamptz + interval '1 millisecond'`,
        [claimed.map((c) => c.eventId), new Date(Math.min(...times)), new Date(Math.max(...times))],
      )) as Array<Record<string, unknown>>;
      const byId = new Map(events.map((r) => [r.id as string, toEvent(r)]));
      for (const c of claimed) c.event = byId.get(c.eventId) ?? null;
      return claimed;
    });
  }

  /**
   * Records a claimed attempt in one transaction: its attempts log entry, the delivery's new state (only under its
   * own fence, except a success, which always counts), then lets `after` update the endpoint in the same
   * transaction (its failure clock); `before` locks the endpoint's row first. Answers `recorded`, `lost` (another attempt took the delivery over) or `gone`.
   */
  async finish(
    c: ClaimedDelivery,
    log: EndpointAttempt,
    outcome: { kind: 'delivered' } | { kind: 'retry'; next: Date } | { kind: 'failed' },
    before: (m: EntityManager) => Promise<void>,
    after: (m: EntityManager) => Promise<void>,
  ): Promise<'recorded' | 'lost' | 'gone'> {
    return this.db.transaction(async (m) => {
      // The endpoint's row first, as a claim takes it: the same order everywhere, so two recordings (or a recording
      // and a claim) never wait for each other in a cycle (the attempts log's key share on it would otherwise be
      // upgraded by the failure clock's lock).
      await before(m);
      const rows = (await m.query(
        `SELECT fence::text AS fence, state FROM endpoint_deliveries WHERE endpoint_id = $1 AND event_id = $2 FOR UPDATE`,
        [c.endpointId, c.eventId],
      )) as Array<{ fence: string; state: string }>;
      if (rows.length === 0) return 'gone';
      await m.query(
        `INSERT INTO endpoint_attempts (endpoint_id, event_id, started_at, at, status, duration_ms, error) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [c.endpointId, c.eventId, c.startedAt, log.at, log.status, log.durationMs, log.error],
      );
      const mine = rows[0].fence === c.fence;
      if (!mine && outcome.kind !== 'delivered') return 'lost';
      const lease = mine ? ', lease_until = NULL' : '';
      if (outcome.kind === 'delivered')
        await m.query(
          `UPDATE endpoint_deliveries SET state = 'delivered', delivered_at = now(), attempts = GREATEST(attempts, $3::int + 1),
             last_error = NULL${lease} WHERE endpoint_id = $1 AND event_id = $2 AND state = 'pending'`,
          [c.endpointId, c.eventId, c.attempts],
        );
      else
        await m.query(
          `UPDATE endpoint_deliveries SET attempts = $3::int + 1, last_error = $4, first_failed_at = coalesce(first_failed_at, now()),
             state = CASE WHEN $5::timestamptz IS NULL THEN 'failed' ELSE state END,
             next_attempt_at = coalesce($5::timestamptz, next_attempt_at)${lease}
           WHERE endpoint_id = $1 AND event_id = $2 AND state = 'pending'`,
          [c.endpointId, c.eventId, c.attempts, (log.error ?? 'network').slice(0, 200), outcome.kind === 'retry' ? outcome.next : null],
        );
      if (mine && rows[0].state !== 'pending')
        await m.query(`UPDATE endpoint_deliveries SET lease_until = NULL WHERE endpoint_id = $1 AND event_id = $2`, [
          c.endpointId,
          c.eventId,
        ]);
      await after(m);
      return mine ? 'recorded' : 'lost';
    });
  }

  /** Gives back a claim that sent nothing (its event is gone, its endpoint disabled meanwhile): the lease ends. */
  async release(c: ClaimedDelivery, state: EndpointDeliveryState | null): Promise<void> {
    await this.db.query(
      `UPDATE endpoint_deliveries SET lease_until = NULL, state = coalesce($4, state)
        WHERE endpoint_id = $1 AND event_id = $2 AND fence = $3::bigint`,
      [c.endpointId, c.eventId, c.fence, state],
    );
  }

  /** Hands a claimed delivery back untried, not before `at` (no attempt counted). */
  async postpone(c: ClaimedDelivery, at: Date): Promise<void> {
    await this.db.query(
      `UPDATE endpoint_deliveries SET lease_until = NULL, next_attempt_at = $4
        WHERE endpoint_id = $1 AND event_id = $2 AND fence = $3::bigint`,
      [c.endpointId, c.eventId, c.fence, at],
    );
  }

  /** When an endpoint is disabled: what was still waiting is `missed` (redeliver `missed` or `any` sends it). */
  async markPendingMissed(m: EntityManager, endpointId: string): Promise<number> {
    const [, n] = (await m.query(
      `UPDATE endpoint_deliveries SET state = 'missed', next_attempt_at = now() WHERE endpoint_id = $1 AND state = 'pending'`,
      [endpointId],
    )) as [unknown, number];
    return n;
  }

  /**
   * Makes the endpoint's deliveries of events received since `since` in `states` pending again (the same
   * webhook-id: the same row), oldest first, at most `max`. A row moves once: two calls never queue one twice.
   */
  async redeliverSince(endpointId: string, since: Date, states: readonly EndpointDeliveryState[], max: number): Promise<number> {
    const [rows] = (await this.db.query(
      `UPDATE endpoint_deliveries d SET state = 'pending', next_attempt_at = now(), retry_from = now(), first_failed_at = NULL
        WHERE d.endpoint_id = $1 AND d.event_id IN (
          SELECT event_id FROM endpoint_deliveries WHERE endpoint_id = $1 AND received_at >= $2 AND state = ANY($3::text[])
           ORDER BY received_at LIMIT $4 FOR UPDATE SKIP LOCKED)
          AND d.state = ANY($3::text[])
        RETURNING d.event_id`,
      [endpointId, since, states, max],
    )) as [Array<{ event_id: string }>, number];
    return rows.length;
  }

  async health(endpointId: string): Promise<HealthFigures> {
    const [a] = (await this.db.query(
      `SELECT count(*)::int AS attempts, count(*) FILTER (WHERE error IS NULL)::int AS ok,
              percentile_disc(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99
         FROM (SELECT error, duration_ms FROM endpoint_attempts WHERE endpoint_id = $1 AND at >= now() - interval '24 hours'
                ORDER BY at DESC LIMIT $2) a`,
      [endpointId, HEALTH_SAMPLE],
    )) as Array<{ attempts: number; ok: number; p99: number | null }>;
    const [p] = (await this.db.query(
      `SELECT count(*)::int AS pending, coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 AS oldest
         FROM endpoint_deliveries WHERE endpoint_id = $1 AND state = 'pending'`,
      [endpointId],
    )) as Array<{ pending: number; oldest: number }>;
    return {
      attempts24h: a.attempts,
      succeeded24h: a.ok,
      p99Ms24h: a.p99 === null ? null : Number(a.p99),
      pending: p.pending,
      oldestPendingSeconds: Math.max(0, Math.floor(Number(p.oldest))),
    };
  }

  /**
   * Retention: deliveries and attempts of events received before `before` (the longest window any tenant keeps is
   * the caller's), at most `batch` rows per statement. Answers how many rows went.
   */
  async deleteOlderThan(before: Date, batch: number): Promise<number> {
    const [, d] = (await this.db.query(
      `DELETE FROM endpoint_deliveries WHERE ctid = ANY(ARRAY(SELECT ctid FROM endpoint_deliveries WHERE received_at < $1 LIMIT $2))`,
      [before, batch],
    )) as [unknown, number];
    const [, a] = (await this.db.query(
      `DELETE FROM endpoint_attempts WHERE id = ANY(ARRAY(SELECT id FROM endpoint_attempts WHERE at < $1 LIMIT $2))`,
      [before, batch],
    )) as [unknown, number];
    return d + a;
  }
}
