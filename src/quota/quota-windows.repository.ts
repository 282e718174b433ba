import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CHANGES_CHANNEL } from '../changes/change-feed.service.js';
import type { QuotaClass } from '../config/quota-budgets.js';
import { preparedQuery } from '../database/pg-pool.js';
import type { LeaseRule, LogGeometry, LogKey, QuotaLane } from './lane-policy.js';
import type { LeaseAnswer, WindowCounts } from './window-host.js';

/** Windows kept per tenant and class: the current one and the two before it (the tenant shows the last two). */
const KEPT_WINDOWS = 3;

/** The lease from the class's sliding log (migration QuotaSlidingLog: the rule is in cws_quota_lease_v1). */
const LOG_LEASE_SQL = `SELECT units, bucket, wait_ms, paused_until FROM cws_quota_lease_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`;

/** Units a lease got and no call spent: out of the bucket they were filed under, while the ring still holds it. */
const LOG_GIVE_BACK_SQL = `UPDATE quota_logs SET
    total[($3::bigint % array_length(total, 1)) + 1] = greatest(0, total[($3::bigint % array_length(total, 1)) + 1] - $5::int),
    people[($3::bigint % array_length(total, 1)) + 1] = greatest(0, people[($3::bigint % array_length(total, 1)) + 1] - CASE WHEN $4 = 'interactive' THEN $5::int ELSE 0 END),
    agents[($3::bigint % array_length(total, 1)) + 1] = greatest(0, agents[($3::bigint % array_length(total, 1)) + 1] - CASE WHEN $4 = 'agent' THEN $5::int ELSE 0 END)
  WHERE tenant_id = $1 AND class = $2 AND span_ms = $6 AND bucket_ms = $7 AND $3::bigint <= head AND $3::bigint > head - array_length(total, 1)`;

/**
 * The figures of a clock window: the instance's counts added to its row. The same statement as the release before
 * this one, which also leased units from this row (`granted`, up to $7 of $6 wanted); this release asks for none.
 */
const FIGURES_SQL = `INSERT INTO quota_windows AS w (tenant_id, class, window_start, window_ms, calls, granted, last_grant, spent, waited, refused, upstream_429)
  VALUES ($1, $2, to_timestamp($3::float8 / 1000), $4, $5, greatest(0, least($6::int, $7::int)), greatest(0, least($6::int, $7::int)), $8, $9, $10, $11)
  ON CONFLICT ON CONSTRAINT pk_quota_windows DO UPDATE SET
    granted = w.granted + greatest(0, least($6::int, $7::int - w.granted)),
    last_grant = greatest(0, least($6::int, $7::int - w.granted)),
    calls = EXCLUDED.calls,
    spent = w.spent + EXCLUDED.spent,
    waited = w.waited + EXCLUDED.waited,
    refused = w.refused + EXCLUDED.refused,
    upstream_429 = w.upstream_429 + EXCLUDED.upstream_429
  RETURNING (w.xmax = 0) AS inserted`;

const FORGET_OLD_SQL = `DELETE FROM quota_windows WHERE tenant_id = $1 AND class = $2 AND window_start < to_timestamp($3::float8 / 1000)`;

/** The pause, kept (the later of two wins) and told to every instance through the change feed in one statement. */
const PAUSE_SQL = `WITH kept AS (
    INSERT INTO quota_pauses AS p (tenant_id, class, until) VALUES ($1, $2, to_timestamp($3::float8 / 1000))
    ON CONFLICT ON CONSTRAINT pk_quota_pauses DO UPDATE SET until = greatest(p.until, EXCLUDED.until)
    RETURNING until)
  SELECT pg_notify('${CHANGES_CHANNEL}', 'quota_pauses:' || $1 || ':' || $2 || ':' || (extract(epoch FROM until) * 1000)::bigint) FROM kept`;

export interface WindowFigures {
  cls: QuotaClass;
  /** ms since the epoch. */
  start: number;
  windowMs: number;
  calls: number;
  granted: number;
  spent: number;
  waited: number;
  refused: number;
  upstream429: number;
}

/** The quota tables, `quota_logs`, `quota_windows` and `quota_pauses`: their one repository. */
@Injectable()
export class QuotaWindowsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Up to `want` units for `lane` from the log of `cls` (a class, or a part of one kept apart: `read:sync`), as the
   * lane rule allows now (`atMs`: tests' clock; null: the database's).
   */
  async lease(
    tenantId: string,
    cls: LogKey,
    log: LogGeometry,
    lane: QuotaLane,
    want: number,
    rule: LeaseRule,
    atMs: number | null = null,
  ): Promise<LeaseAnswer> {
    const [row] = await preparedQuery<{ units: number; bucket: string; wait_ms: number; paused_until: number | null }>(this.db, {
      name: 'quota_log_lease',
      text: LOG_LEASE_SQL,
      values: [
        tenantId,
        cls,
        log.spanMs,
        log.bucketMs,
        log.calls,
        lane,
        want,
        rule.peopleFloor,
        rule.headroom,
        rule.parts,
        rule.burst,
        atMs,
      ],
    });
    return { units: row.units, bucket: Number(row.bucket), waitMs: row.wait_ms, pausedUntil: row.paused_until };
  }

  async giveBack(tenantId: string, cls: QuotaClass, log: LogGeometry, bucket: number, lane: QuotaLane, units: number): Promise<void> {
    await preparedQuery(this.db, {
      name: 'quota_log_give_back',
      text: LOG_GIVE_BACK_SQL,
      values: [tenantId, cls, bucket, lane, units, log.spanMs, log.bucketMs],
    });
  }

  /** What this instance's calls of a class did since its last report, to the figures of the clock window that starts at `start`. */
  async report(
    tenantId: string,
    cls: QuotaClass,
    window: { start: number; windowMs: number; calls: number },
    counts: WindowCounts,
  ): Promise<void> {
    const [row] = await preparedQuery<{ inserted: boolean }>(this.db, {
      name: 'quota_figures',
      text: FIGURES_SQL,
      values: [
        tenantId,
        cls,
        window.start,
        window.windowMs,
        window.calls,
        0,
        0,
        counts.spent,
        counts.waited,
        counts.refused,
        counts.upstream429,
      ],
    });
    if (row.inserted) {
      await preparedQuery(this.db, {
        name: 'quota_forget_old',
        text: FORGET_OLD_SQL,
        values: [tenantId, cls, window.start - (KEPT_WINDOWS - 1) * window.windowMs],
      });
    }
  }

  async pause(tenantId: string, cls: QuotaClass, until: number): Promise<void> {
    await preparedQuery(this.db, { name: 'quota_pause', text: PAUSE_SQL, values: [tenantId, cls, until] });
  }

  /** A tenant's windows (newest first per class) and its pauses still running. */
  async figuresOf(tenantId: string): Promise<{ windows: WindowFigures[]; pauses: Partial<Record<QuotaClass, number>> }> {
    const rows = (await this.db.query(
      `SELECT class, (extract(epoch FROM window_start) * 1000)::float8 AS start, window_ms, calls, granted, spent, waited, refused, upstream_429
         FROM quota_windows WHERE tenant_id = $1 ORDER BY class, window_start DESC`,
      [tenantId],
    )) as Array<Record<string, number | string>>;
    const paused = (await this.db.query(
      `SELECT class, (extract(epoch FROM until) * 1000)::float8 AS until FROM quota_pauses WHERE tenant_id = $1 AND until > now()`,
      [tenantId],
    )) as Array<{ class: QuotaClass; until: number }>;
    return {
      windows: rows.map((r) => ({
        cls: r.class as QuotaClass,
        start: Number(r.start),
        windowMs: Number(r.window_ms),
        calls: Number(r.calls),
        granted: Number(r.granted),
        spent: Number(r.spent),
        waited: Number(r.waited),
        refused: Number(r.refused),
        upstream429: Number(r.upstream_429),
      })),
      pauses: Object.fromEntries(paused.map((p) => [p.class, Number(p.until)])),
    };
  }
}
