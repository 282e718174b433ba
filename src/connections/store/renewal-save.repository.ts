import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../../config/app-config.js';
import { APP_CONFIG } from '../../config/config.module.js';
import { preparedQuery } from '../../database/pg-pool.js';
import { GroupCommitLane, type LaneHold } from './commit-lane.js';
import { RENEWAL_HISTORY } from './connection-health.repository.js';
import type { RenewedFields } from './connections.repository.js';
import { queryRows, type Row } from './query-rows.js';

/**
 * A renewed pair to save, with the version and lease it was renewed under, and how long the renewal took until
 * the pair was handed to its save (its line in the history: the save writes it with the pair).
 */
export type RenewedItem = RenewedFields & { id: string; tenantId: string; version: number; durationMs: number };

/** Ids per notification, as the change trigger sends them (NOTIFY payloads stay under 8,000 bytes). */
const IDS_PER_NOTIFICATION = 100;

/** Renewed connections are announced to the other instances this long after the first of them committed. */
const ANNOUNCE_AFTER_MS = 20;

/**
 * A renewal's hold on the commit lane (commit-lane.ts), taken before its token call: its pair is then
 * committed the moment it arrives, or with the pairs that arrived during the one commit in flight.
 */
export type CommitLane = LaneHold<RenewedItem>;

/** Holds beyond REFRESH_CONCURRENCY, for on-demand renewals (a caller whose token expired, a 401, a forced renewal). */
const ON_DEMAND_LANES = 4;

/** How long the lane's commit may wait for a row lock held by another transaction (see reserveCommitLane). */
const LANE_LOCK_TIMEOUT_MS = 1000;

/**
 * The CAS save of renewed pairs, and in the same statement the history line of each pair that landed (a
 * success also clears lastError). Written apart, after the fact, the line cost a statement of its own per
 * renewal batch that re-parsed every value as text, checked that the connection still existed and ran its
 * own transaction: about 17 µs of PostgreSQL CPU per renewal, against about 8 inside the save
 * (bench/micro-renewal-sql.ts, docs/renewal.md). Written with the pair, the line also lands exactly when the
 * pair does, under the lease, so no other renewal's line can come between. The history rows are locked in id
 * order, as the pairs are.
 */
export const SAVE_RENEWED_SQL = `WITH saved AS (
  UPDATE connections c SET access_token_enc = v.at, refresh_token_enc = v.rt, access_token_expires_at = to_timestamp(v.exp_ms / 1000),
        refresh_due_at = to_timestamp(v.due_ms / 1000), last_refreshed_at = to_timestamp(v.now_ms / 1000), refresh_failures = 0,
        version = c.version + 1, lease_owner = NULL, lease_until = NULL, updated_at = to_timestamp(v.now_ms / 1000)
   FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::float8[], $7::float8[], $8::float8[], $9::integer[])
        AS v(id, version, at, rt, exp_ms, due_ms, now_ms, ms)
  WHERE c.id = v.id AND c.version = v.version AND c.lease_owner = $1
  RETURNING c.id, c.last_refreshed_at, v.ms
), history AS (
  INSERT INTO connection_health AS h (connection_id, renewal_at, renewal_outcome, renewal_error, renewal_ms)
  SELECT s.id, ARRAY[s.last_refreshed_at], '{renewed}', '{NULL}', ARRAY[s.ms] FROM saved s ORDER BY s.id
  ON CONFLICT (connection_id) DO UPDATE
     SET last_error_code = NULL, last_error_at = NULL,
         renewal_at = (EXCLUDED.renewal_at || h.renewal_at)[1:${RENEWAL_HISTORY}],
         renewal_outcome = (EXCLUDED.renewal_outcome || h.renewal_outcome)[1:${RENEWAL_HISTORY}],
         renewal_error = (EXCLUDED.renewal_error || h.renewal_error)[1:${RENEWAL_HISTORY}],
         renewal_ms = (EXCLUDED.renewal_ms || h.renewal_ms)[1:${RENEWAL_HISTORY}]
)
SELECT id FROM saved`;

/**
 * The save of renewed pairs: the compare-and-swap under the lease, on renewal's commit lane or on the shared
 * pool, with each pair's line in the connection's history; and the announcement of what the lane saved to the
 * other instances' caches.
 */
@Injectable()
export class RenewalSaveRepository implements BeforeApplicationShutdown, OnApplicationShutdown {
  private lane: GroupCommitLane<RenewedItem> | null = null;
  private readonly toAnnounce: Array<{ tenantId: string; id: string }> = [];
  private announcing: Promise<void> | null = null;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Renewals finish during module destruction; their announcements are sent before the pool closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.announcing;
  }

  async onApplicationShutdown(): Promise<void> {
    const lane = this.lane;
    this.lane = null;
    await lane?.close();
  }

  /**
   * Takes a hold on renewal's commit lane (REFRESH_CONCURRENCY + 4 holds at most; the lane's one connection
   * is opened by the first hold and closed after 10 s without one). Waiting for a hold or for the connection
   * happens before the token call, where it costs nothing but time.
   */
  reserveCommitLane(): Promise<CommitLane> {
    this.lane ??= new GroupCommitLane<RenewedItem>(
      {
        connectionString: this.config.databaseUrl ?? undefined,
        applicationName: `cws-connect ${this.config.instanceId} renewal`,
        // The change trigger stays silent on this session: a NOTIFY would serialize the commits (migration
        // DeferredRenewalNotify); announceRenewed sends the notifications instead. A row lock held by someone
        // else (a reconnect's transaction) may hold the lane's commit at most this long: then every pair in
        // it goes to its own retry on the shared pool.
        // The save's generic plan (a nested loop over the pairs, by primary key) is the right one for any number of
        // pairs; a custom plan per execution cost about 90 µs of planning per commit.
        options: `-c cws.defer_change_notify=on -c lock_timeout=${LANE_LOCK_TIMEOUT_MS} -c plan_cache_mode=force_generic_plan`,
        holds: this.config.refresh.concurrency + ON_DEMAND_LANES,
        idleMs: 10_000,
        connectTimeoutMs: 5000,
      },
      async (run, owner, items) => {
        const saved = await runSave(run, owner, items);
        for (const item of items) if (saved.has(item.id)) this.announceRenewed(item.tenantId, item.id);
        return saved;
      },
    );
    return this.lane.reserve();
  }

  /**
   * Tells the other instances' caches (src/changes) that a connection saved on the commit lane changed, as the
   * trigger would have: `connections:<tenant>:<id>,...`. The ids committed within ANNOUNCE_AFTER_MS of the first
   * go together in one statement (under a renewal storm the lane commits every millisecond or two, and one
   * notifying transaction per commit cost about as much as the commit). Best effort: a cache that misses it
   * serves the previous token, which the upstream answers with 401, and routing renews on 401 by version
   * (docs/renewal.md).
   */
  private announceRenewed(tenantId: string, id: string): void {
    this.toAnnounce.push({ tenantId, id });
    this.announcing ??= (async () => {
      try {
        await new Promise((resolve) => setTimeout(resolve, ANNOUNCE_AFTER_MS));
        while (this.toAnnounce.length > 0) {
          const batch = this.toAnnounce.splice(0, 10_000);
          const byTenant = new Map<string, string[]>();
          for (const c of batch) {
            const ids = byTenant.get(c.tenantId);
            if (ids) ids.push(c.id);
            else byTenant.set(c.tenantId, [c.id]);
          }
          const messages: string[] = [];
          for (const [tenant, ids] of byTenant) {
            for (let i = 0; i < ids.length; i += IDS_PER_NOTIFICATION)
              messages.push(`connections:${tenant}:${ids.slice(i, i + IDS_PER_NOTIFICATION).join(',')}`);
          }
          await queryRows(this.db, `SELECT pg_notify('cws_changes', m) FROM unnest($1::text[]) AS m`, [messages]).catch(() => undefined);
        }
      } finally {
        this.announcing = null;
      }
    })();
  }

  /**
   * The compare-and-swap that commits a renewal: only on the version that was renewed and only while this
   * instance still holds the lease. A new version tells every cache and every waiter that the token moved.
   * True when it landed; the caller knows every column it wrote, so nothing else comes back.
   */
  async saveRenewed(owner: string, item: RenewedItem): Promise<boolean> {
    return (await this.saveRenewedMany(owner, [item])).has(item.id);
  }

  /**
   * saveRenewed for many rows in one statement. The compare-and-swap stays per row: a row whose version moved
   * or whose lease is gone is simply not updated, and its id does not come back. Rows are sorted by id so that
   * two writers lock them in the same order (no deadlock).
   */
  async saveRenewedMany(owner: string, items: RenewedItem[]): Promise<Set<string>> {
    return runSave(async (q) => ({ rows: await preparedQuery<Row>(this.db, q) }), owner, items);
  }
}

/** The CAS save of renewed pairs (with their history lines), as a named prepared statement on whichever connection runs it. */
async function runSave(run: (q: pg.QueryConfig) => Promise<{ rows: Row[] }>, owner: string, items: RenewedItem[]): Promise<Set<string>> {
  const sorted = items.length > 1 ? [...items].sort((x, y) => (x.id < y.id ? -1 : 1)) : items;
  const n = sorted.length;
  const [ids, versions, ats, rts, exps, dues, nows, durations] = [
    new Array<string>(n),
    new Array<number>(n),
    new Array<string>(n),
    new Array<string>(n),
    new Array<number>(n),
    new Array<number>(n),
    new Array<number>(n),
    new Array<number>(n),
  ];
  for (let k = 0; k < n; k++) {
    const i = sorted[k];
    ids[k] = i.id;
    versions[k] = i.version;
    ats[k] = i.accessTokenEnc;
    rts[k] = i.refreshTokenEnc;
    // Times travel as epoch milliseconds: formatting Dates as timestamptz text was a visible share of the CPU.
    exps[k] = i.accessTokenExpiresAt.getTime();
    dues[k] = i.refreshDueAt.getTime();
    nows[k] = i.now.getTime();
    durations[k] = i.durationMs;
  }
  const { rows } = await run({
    name: 'cws_refresh_save',
    text: SAVE_RENEWED_SQL,
    values: [owner, ids, versions, ats, rts, exps, dues, nows, durations],
  });
  return new Set(rows.map((r) => r.id as string));
}
