import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';

/** What is counted: failed API credentials per client, failed sign-ins per client and from every client together. */
export type FailureKind = 'api_key' | 'sign_in' | 'sign_in_all';

/** A client's count as the table holds it: the failures of its window, which started at `windowStart`. */
export interface FailureCount {
  kind: FailureKind;
  client: string;
  windowStart: Date;
  failures: number;
}

/** An instance's failures of one client not yet written: `count` of them, the first at `firstAt`. */
export interface FailureIncrement {
  kind: FailureKind;
  client: string;
  firstAt: Date;
  count: number;
}

interface RawCount {
  kind: FailureKind;
  client: string;
  window_start: Date;
  failures: number;
}

/** Every read and write of the auth_failures table (the throttle's counts shared by the instances). */
@Injectable()
export class AuthFailuresRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Adds each increment to its client's window, or starts a new window at the increment's first failure when the
   * stored one had ended by then; answers the totals. One statement for all of them, rows taken in one order
   * (kind, client) so that two instances' statements never wait on each other in a circle.
   */
  async add(increments: FailureIncrement[], windowMs: number): Promise<FailureCount[]> {
    const sorted = [...increments].sort((a, b) => (a.kind === b.kind ? cmp(a.client, b.client) : cmp(a.kind, b.kind)));
    const rows = (await this.db.query(
      `INSERT INTO auth_failures AS f (kind, client, window_start, failures, updated_at)
       SELECT kind, client, first_at, n, clock_timestamp()
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[]) AS i (kind, client, first_at, n)
       ON CONFLICT (kind, client) DO UPDATE SET
         window_start = CASE WHEN f.window_start + make_interval(secs => $5 / 1000.0) <= excluded.window_start
                             THEN excluded.window_start ELSE f.window_start END,
         failures     = CASE WHEN f.window_start + make_interval(secs => $5 / 1000.0) <= excluded.window_start
                             THEN excluded.failures ELSE f.failures + excluded.failures END,
         updated_at   = clock_timestamp()
       RETURNING kind, client, window_start, failures`,
      [sorted.map((i) => i.kind), sorted.map((i) => i.client), sorted.map((i) => i.firstAt), sorted.map((i) => i.count), windowMs],
    )) as RawCount[];
    return rows.map(toCount);
  }

  /**
   * The counts at or past their kind's bound written within the last `withinMs` (by the database's clock, so that
   * no instance's clock matters): how an instance learns of clients that other instances counted.
   */
  async pastBounds(bounds: Record<FailureKind, number>, withinMs: number): Promise<FailureCount[]> {
    const kinds = Object.keys(bounds) as FailureKind[];
    const rows = (await this.db.query(
      `SELECT f.kind, f.client, f.window_start, f.failures
         FROM auth_failures f
         JOIN unnest($1::text[], $2::int[]) AS b (kind, bound) ON b.kind = f.kind
        WHERE f.updated_at >= clock_timestamp() - make_interval(secs => $3 / 1000.0)
          AND f.failures >= b.bound`,
      [kinds, kinds.map((k) => bounds[k]), withinMs],
    )) as RawCount[];
    return rows.map(toCount);
  }

  /** Removes up to `limit` counts whose window started before `before` (ended); answers how many. */
  async sweep(before: Date, limit: number): Promise<number> {
    const [, n] = (await this.db.query(
      // The condition again outside the subquery: a row whose new window began meanwhile stays.
      `DELETE FROM auth_failures
        WHERE (kind, client) IN (SELECT kind, client FROM auth_failures WHERE window_start < $1 LIMIT $2)
          AND window_start < $1`,
      [before, limit],
    )) as [unknown, number];
    return n;
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function toCount(r: RawCount): FailureCount {
  return { kind: r.kind, client: r.client, windowStart: r.window_start, failures: r.failures };
}
