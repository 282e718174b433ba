import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { ConnectionEntity } from './connection.entity.js';

/** How many renewals each connection keeps in its history. */
export const RENEWAL_HISTORY = 20;

/** The last failed renewal of a connection that has not worked since (cleared by a success or a reconnect). */
export interface LastError {
  code: string;
  at: Date;
}

export type RenewalOutcome = 'renewed' | 'failed' | 'reauth_required';

/** One renewal that held the lease: what came of it, and how long it took. */
export interface RenewalRecord {
  at: Date;
  outcome: RenewalOutcome;
  /** The error code of a failed renewal (`upstream_unavailable`, `refresh_token_rejected`, ...); null when renewed. */
  error: string | null;
  durationMs: number;
}

export interface ConnectionWithHealth {
  connection: ConnectionEntity;
  lastError: LastError | null;
}

export function lastErrorOf(code: string | null, at: Date | null): LastError | null {
  return code && at ? { code, at } : null;
}

/**
 * How many lines of a history row are newer than the incoming one (EXCLUDED, one line): a line recorded after
 * the fact (a failure, buffered for HEALTH_FLUSH_MS) may reach the row after a newer success that was written
 * with its pair, and must then go behind it and leave lastError alone.
 */
const NEWER_LINES = `(SELECT count(*)::int FROM unnest(h.renewal_at) AS t(at) WHERE t.at > EXCLUDED.renewal_at[1])`;

/** A history column with the incoming line placed by time, newest first, cut to RENEWAL_HISTORY. */
const placed = (column: string) =>
  `(h.${column}[1:${NEWER_LINES}] || EXCLUDED.${column} || h.${column}[${NEWER_LINES} + 1:])[1:${RENEWAL_HISTORY}]`;

interface HealthItem extends RenewalRecord {
  id: string;
}

/** Renewal outcomes wait this long to be written together: they are diagnostics, not part of a renewal. */
const HEALTH_FLUSH_MS = 50;

/**
 * A connection's renewal history and lastError (the connection_health table, the connections table's
 * diagnostics). A renewed pair's line is written by its save (renewal-save.repository.ts); this writes every
 * other outcome, after the fact, and reads the history back.
 */
@Injectable()
export class ConnectionHealthRepository implements BeforeApplicationShutdown {
  private healthBuffer: HealthItem[] = [];
  private healthFlush: Promise<void> | null = null;

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** The connection's last renewals, newest first; null when the tenant has no such connection. */
  async renewalHistory(tenantId: string, id: string): Promise<RenewalRecord[] | null> {
    const rows = (await this.db.query(
      `SELECT h.renewal_at, h.renewal_outcome, h.renewal_error, h.renewal_ms
         FROM connections c LEFT JOIN connection_health h ON h.connection_id = c.id
        WHERE c.tenant_id = $1 AND c.id = $2`,
      [tenantId, id],
    )) as Array<{
      renewal_at: Date[] | null;
      renewal_outcome: RenewalOutcome[] | null;
      renewal_error: Array<string | null> | null;
      renewal_ms: number[] | null;
    }>;
    if (rows.length === 0) return null;
    const r = rows[0];
    return (r.renewal_at ?? []).map((at, i) => ({
      at,
      outcome: r.renewal_outcome![i],
      error: r.renewal_error![i] ?? null,
      durationMs: r.renewal_ms![i],
    }));
  }

  /**
   * Keeps the outcome of a renewal that did not save a pair (a renewed pair's line is written by its save):
   * the history (the last RENEWAL_HISTORY) and lastError (set by a failure, cleared by a success), each line
   * placed by its time. The outcomes of HEALTH_FLUSH_MS go in one transaction that does not wait for its WAL
   * flush: under an outage a few statements carry thousands of them, and none competes with the renewals' own
   * commits for the disk. A crash may lose the last moment of history, never a token. Resolves once written;
   * a connection deleted meanwhile is skipped.
   */
  recordRenewal(connectionId: string, record: RenewalRecord): Promise<void> {
    this.healthBuffer.push({ id: connectionId, ...record });
    this.healthFlush ??= new Promise((resolve) => setTimeout(resolve, HEALTH_FLUSH_MS)).then(() => this.flushHealth());
    return this.healthFlush;
  }

  /** Renewals finish during module destruction; their records are written before the pool closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.healthFlush?.catch(() => undefined);
  }

  private async flushHealth(): Promise<void> {
    const items = this.healthBuffer;
    this.healthBuffer = [];
    this.healthFlush = null;
    const write = () =>
      this.db.transaction(async (m) => {
        await m.query(`SET LOCAL synchronous_commit = off`);
        await this.writeHealth(m, items);
      });
    try {
      await write();
    } catch (e) {
      // A connection deleted after the statement's snapshot fails its foreign key; once more, it is skipped.
      if ((e as { code?: unknown }).code !== '23503') throw e;
      await write();
    }
  }

  private async writeHealth(m: EntityManager, items: HealthItem[]): Promise<void> {
    // ON CONFLICT may touch a row only once per statement: a second outcome of one connection in the same batch
    // goes in the next statement. Oldest first, so that the newest ends in front and decides lastError.
    const rounds: HealthItem[][] = [];
    const seen = new Map<string, number>();
    for (const item of [...items].sort((a, b) => a.at.getTime() - b.at.getTime())) {
      const k = seen.get(item.id) ?? 0;
      seen.set(item.id, k + 1);
      (rounds[k] ??= []).push(item);
    }
    for (const round of rounds) {
      // Rows locked in id order, as the pairs' saves lock theirs.
      round.sort((a, b) => (a.id < b.id ? -1 : 1));
      await this.writeHealthRound(m, round);
    }
  }

  private async writeHealthRound(m: EntityManager, items: HealthItem[]): Promise<void> {
    const failed = (i: HealthItem) => i.outcome !== 'renewed';
    await m.query(
      `INSERT INTO connection_health AS h (connection_id, last_error_code, last_error_at, renewal_at, renewal_outcome, renewal_error, renewal_ms)
       SELECT v.id, v.code, v.error_at, ARRAY[v.at], ARRAY[v.outcome], ARRAY[v.error], ARRAY[v.ms]
         FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[], $7::integer[])
              AS v(id, code, error_at, at, outcome, error, ms)
        WHERE EXISTS (SELECT 1 FROM connections c WHERE c.id = v.id)
       ON CONFLICT (connection_id) DO UPDATE
          SET last_error_code = CASE WHEN ${NEWER_LINES} = 0 THEN EXCLUDED.last_error_code ELSE h.last_error_code END,
              last_error_at = CASE WHEN ${NEWER_LINES} = 0 THEN EXCLUDED.last_error_at ELSE h.last_error_at END,
              renewal_at = ${placed('renewal_at')}, renewal_outcome = ${placed('renewal_outcome')},
              renewal_error = ${placed('renewal_error')}, renewal_ms = ${placed('renewal_ms')}`,
      [
        items.map((i) => i.id),
        items.map((i) => (failed(i) ? (i.error ?? 'unknown') : null)),
        items.map((i) => (failed(i) ? i.at : null)),
        items.map((i) => i.at),
        items.map((i) => i.outcome),
        items.map((i) => i.error),
        items.map((i) => i.durationMs),
      ],
    );
  }
}
