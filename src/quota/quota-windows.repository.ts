import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CHANGES_CHANNEL } from '../changes/change-feed.service.js';
import type { QuotaClass } from '../config/quota-budgets.js';
import { preparedQuery } from '../database/pg-pool.js';
import type { LeaseAnswer, WindowCounts } from './window-host.js';

/** Windows kept per tenant and class: the current one and the two before it (the tenant shows the last two). */
const KEPT_WINDOWS = 3;

/**
 * The lease: up to $6 units of the window, never past $7 granted in all ($7 is never more than the budget, $5), and
 * the instance's figures added. The row is the window's one lock: two instances' leases are applied one after the
 * other, each seeing the other's grant. `last_grant` is written in the same statement so the answer can say what
 * this lease got (the SET list sees the row as it was). Also answers the class's pause, and whether the row is new.
 */
const LEASE_SQL = `INSERT INTO quota_windows AS w (tenant_id, class, window_start, window_ms, calls, granted, last_grant, spent, waited, refused, upstream_429)
  VALUES ($1, $2, to_timestamp($3::float8 / 1000), $4, $5, greatest(0, least($6::int, $7::int)), greatest(0, least($6::int, $7::int)), $8, $9, $10, $11)
  ON CONFLICT ON CONSTRAINT pk_quota_windows DO UPDATE SET
    granted = w.granted + greatest(0, least($6::int, $7::int - w.granted)),
    last_grant = greatest(0, least($6::int, $7::int - w.granted)),
    calls = EXCLUDED.calls,
    spent = w.spent + EXCLUDED.spent,
    waited = w.waited + EXCLUDED.waited,
    refused = w.refused + EXCLUDED.refused,
    upstream_429 = w.upstream_429 + EXCLUDED.upstream_429
  RETURNING w.granted, w.last_grant, (w.xmax = 0) AS inserted,
    (SELECT (extract(epoch FROM p.until) * 1000)::float8 FROM quota_pauses p
      WHERE p.tenant_id = $1 AND p.class = $2 AND p.until > now()) AS paused_until`;

const FORGET_OLD_SQL = `DELETE FROM quota_windows WHERE tenant_id = $1 AND class = $2 AND window_start < to_timestamp($3::float8 / 1000)`;

const GIVE_BACK_SQL = `UPDATE quota_windows SET granted = granted - least($4::int, granted)
  WHERE tenant_id = $1 AND class = $2 AND window_start = to_timestamp($3::float8 / 1000)`;

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

/** The quota tables, `quota_windows` and `quota_pauses`: their one repository. */
@Injectable()
export class QuotaWindowsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async lease(
    tenantId: string,
    cls: QuotaClass,
    window: { start: number; windowMs: number; calls: number },
    want: number,
    ceiling: number,
    counts: WindowCounts,
  ): Promise<LeaseAnswer> {
    const [row] = await preparedQuery<{ granted: number; last_grant: number; inserted: boolean; paused_until: number | null }>(this.db, {
      name: 'quota_lease',
      text: LEASE_SQL,
      values: [
        tenantId,
        cls,
        window.start,
        window.windowMs,
        window.calls,
        want,
        Math.min(ceiling, window.calls),
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
    return { units: row.last_grant, granted: row.granted, pausedUntil: row.paused_until };
  }

  async giveBack(tenantId: string, cls: QuotaClass, start: number, units: number): Promise<void> {
    await preparedQuery(this.db, { name: 'quota_give_back', text: GIVE_BACK_SQL, values: [tenantId, cls, start, units] });
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
