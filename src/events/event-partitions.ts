import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export const DAY_MS = 86_400_000;

/** The two tables partitioned by day (migrations/1797000000000-EventRetention.ts). */
const PARENTS = ['events', 'event_attempts'] as const;

export interface Partition {
  name: string;
  parent: (typeof PARENTS)[number];
  /** Every row in it is older than this (its upper bound). */
  until: Date;
  /** A DETACH ... CONCURRENTLY that was interrupted: it is finalized, then dropped. */
  detachPending: boolean;
  /** False: detached already (a drop interrupted after its detach): only the DROP is left. */
  attached: boolean;
}

/**
 * The day partitions of `events` (by received_at) and `event_attempts` (by at): created ahead, dropped
 * behind. Creating attaches an empty table (SHARE UPDATE EXCLUSIVE on the parent: readers and writers go on);
 * dropping detaches CONCURRENTLY first, so no statement takes a lock that stops inserts or reads, and the cost of
 * removing a day does not depend on how many rows it holds.
 */
@Injectable()
export class EventPartitions {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Makes sure the partitions of each day (UTC) in [from, from + days) exist, but for the days the first
   * partition (the tables from before partitioning, up to their cut-off) holds; answers how many tables were made.
   */
  async ensure(from: Date, days: number): Promise<number> {
    const first = (await this.list()).filter((p) => p.attached && p.name.includes('_pre_')).map((p) => p.until.getTime());
    const end = startOfDay(from).getTime() + days * DAY_MS;
    let made = 0;
    for (let at = Math.max(startOfDay(from).getTime(), ...first); at < end; at += DAY_MS) {
      const day = new Date(at).toISOString().slice(0, 10);
      made += await this.db.transaction(async (m) => {
        await m.query(`SET LOCAL lock_timeout = '1s'`);
        const [row] = (await m.query(`SELECT cws_ensure_event_partitions($1::date) AS made`, [day])) as Array<{ made: number }>;
        return Number(row.made);
      });
    }
    return made;
  }

  async list(): Promise<Partition[]> {
    const rows = (await this.db.query(
      `SELECT c.relname AS name, (regexp_match(c.relname, '^(events|event_attempts)_'))[1] AS parent,
              coalesce(i.inhdetachpending, false) AS pending, i.inhrelid IS NOT NULL AS attached
         FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
        WHERE c.relname ~ '^(events|event_attempts)_(pre_|p)[0-9]{8}$' AND c.relkind = 'r'
          AND c.relnamespace = current_schema()::regnamespace`,
    )) as Array<{ name: string; parent: Partition['parent']; pending: boolean; attached: boolean }>;
    return rows.flatMap((r) => {
      const until = upperBoundOf(r.name);
      return until && PARENTS.includes(r.parent)
        ? [{ name: r.name, parent: r.parent, until, detachPending: r.pending, attached: r.attached }]
        : [];
    });
  }

  /** Drops every partition whose rows are all received (or attempted) before `cutoff`; answers their names. */
  async dropBefore(cutoff: Date): Promise<string[]> {
    const dropped: string[] = [];
    // A detach left pending first: while one is, PostgreSQL refuses another concurrent detach on its parent.
    const parts = (await this.list()).sort((a, b) => Number(b.detachPending) - Number(a.detachPending));
    for (const p of parts) {
      if (p.until.getTime() > cutoff.getTime()) continue;
      const runner = this.db.createQueryRunner();
      await runner.connect();
      try {
        // Outside any transaction (CONCURRENTLY): waits for readers of the partition, blocks nobody.
        if (p.attached)
          await runner.query(`ALTER TABLE ${p.parent} DETACH PARTITION ${p.name} ${p.detachPending ? 'FINALIZE' : 'CONCURRENTLY'}`);
        await runner.query(`DROP TABLE ${p.name}`);
        dropped.push(p.name);
      } finally {
        await runner.release();
      }
    }
    return dropped;
  }
}

/** The upper bound a partition's name states: `<parent>_p<yyyymmdd>` ends a day later, `<parent>_pre_<yyyymmdd>` on that day. */
export function upperBoundOf(name: string): Date | null {
  const m = /_(pre_)?p?(\d{4})(\d{2})(\d{2})$/.exec(name);
  if (!m) return null;
  const day = Date.UTC(Number(m[2]), Number(m[3]) - 1, Number(m[4]));
  return new Date(m[1] ? day : day + DAY_MS);
}

export function startOfDay(t: Date): Date {
  return new Date(Math.floor(t.getTime() / DAY_MS) * DAY_MS);
}
