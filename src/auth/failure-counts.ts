import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { databaseOutage, describeDatabaseError, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { AuthFailuresRepository, type FailureCount, type FailureIncrement, type FailureKind } from './auth-failures.repository.js';

/** How often an instance writes its new failures and reads what the others counted. */
export const FLUSH_INTERVAL_MS = 200;
/** How far back each read looks for counts past a bound (database clock): many reads, so a late commit is not missed. */
const RECENT_MS = 5000;
/** Clients remembered at once; past it, ended windows are dropped, then the oldest (docs/security.md). */
const MAX_CLIENTS = 50_000;
const SWEEP_INTERVAL_MS = 60_000;
const SWEEP_BATCH = 5000;

interface Count {
  /** The start of the client's window, as last known (the table's, once read). */
  start: number;
  /** Its failures in the table, as last read (every instance's). */
  stored: number;
  /** This instance's failures being written now (not in `stored` yet). */
  writing: number;
  /** This instance's failures not yet written, the first at `firstPending`. */
  pending: number;
  firstPending: number;
}

/**
 * The throttle's counts of failed credentials, per kind and client, in windows of AUTH_FAILURE_WINDOW_MS that start
 * at a client's first failure. Shared by every instance through the auth_failures table and kept across restarts,
 * without a round trip on any request's path: a failure is counted in memory at once, and every 200 ms the instance
 * writes its new failures in one statement (reading back the totals) and reads the counts that reached a bound on
 * the other instances. So a bound holds once across N instances, not N times; what can pass beyond it is one
 * flush's worth of failures per other instance (docs/security.md, "Credential guessing").
 */
@Injectable()
export class FailureCounts implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('FailureCounts');
  private readonly counts = new Map<string, Count>();
  private readonly windowMs: number;
  readonly bounds: Readonly<Record<FailureKind, number>>;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  /** The first read looks back a whole window: after a restart, the clients already past a bound are known at once. */
  private lookBackMs: number;
  private lastSweep = 0;
  private failing = false;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly repo: AuthFailuresRepository,
    private readonly clock: Clock,
  ) {
    const s = config.security;
    this.windowMs = s.authFailureWindowMs;
    this.lookBackMs = s.authFailureWindowMs;
    this.bounds = Object.freeze({
      api_key: s.apiKeyMaxFailuresPerClient,
      sign_in: s.signInMaxFailuresPerClient,
      sign_in_all: s.signInMaxFailures,
    });
  }

  onModuleInit(): void {
    this.timer = setInterval(() => void this.tick(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flushNow(); // what was counted since the last write is kept for the next start
  }

  /** Seconds left in the client's window when it has reached its kind's bound; 0 while it has not. */
  waitFor(kind: FailureKind, client: string): number {
    const now = this.clock.now().getTime();
    const c = this.counts.get(key(kind, client));
    if (!c || now - c.start >= this.windowMs || c.stored + c.writing + c.pending < this.bounds[kind]) return 0;
    return Math.max(1, Math.ceil((c.start + this.windowMs - now) / 1000));
  }

  /** One more failure of the client: counted here at once, written with the next flush. */
  add(kind: FailureKind, client: string): void {
    const now = this.clock.now().getTime();
    const k = key(kind, client);
    let c = this.counts.get(k);
    if (!c || now - c.start >= this.windowMs) {
      if (!c && this.counts.size >= MAX_CLIENTS) this.evict(now);
      c = { start: now, stored: 0, writing: 0, pending: 0, firstPending: now };
      this.counts.delete(k); // re-inserted: the Map's order stays the order of windows started
      this.counts.set(k, c);
    }
    if (c.pending === 0) c.firstPending = now;
    c.pending++;
  }

  /** Writes this instance's new failures, reads what every instance counted; one at a time, never on a request's path. */
  private tick(): Promise<void> {
    this.ticking ??= this.flush().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  /** A flush that starts after this call (the timer's, or one of its own): at shutdown, and for tests. */
  async flushNow(): Promise<void> {
    if (this.ticking) await this.ticking;
    await this.tick();
  }

  private async flush(): Promise<void> {
    const increments: FailureIncrement[] = [];
    const taken: Array<[Count, number]> = [];
    for (const [k, c] of this.counts) {
      if (c.pending === 0) continue;
      const [kind, client] = split(k);
      increments.push({ kind, client, firstAt: new Date(c.firstPending), count: c.pending });
      taken.push([c, c.pending]);
      c.writing = c.pending;
      c.pending = 0;
    }
    try {
      if (increments.length > 0) {
        const totals = await this.repo.add(increments, this.windowMs);
        for (const [c] of taken) c.writing = 0; // in the totals now
        taken.length = 0;
        this.learn(totals);
      }
      this.learn(await this.repo.pastBounds(this.bounds, this.lookBackMs));
      this.lookBackMs = RECENT_MS;
      await this.sweep();
      if (this.failing) this.logger.log('failure counts are written and read again');
      this.failing = false;
    } catch (e) {
      // Counted here still (a bound holds per instance meanwhile); written with the next flush that succeeds.
      for (const [c, n] of taken) {
        c.writing = 0;
        c.pending += n;
      }
      if (isDatabaseUnavailable(e)) {
        databaseOutage.report(e, 'background'); // the outage's own lines tell its start and end
      } else {
        if (!this.failing) this.logger.warn({ error: describeDatabaseError(e) }, 'failure counts cannot be written or read');
        this.failing = true;
      }
    }
  }

  /** Takes the table's counts: its window start wins (all instances count in it), its total when it is newer. */
  private learn(rows: FailureCount[]): void {
    const now = this.clock.now().getTime();
    for (const r of rows) {
      const start = r.windowStart.getTime();
      if (now - start >= this.windowMs) continue;
      const k = key(r.kind, r.client);
      const c = this.counts.get(k);
      if (!c) {
        if (this.counts.size >= MAX_CLIENTS) this.evict(now);
        this.counts.set(k, { start, stored: r.failures, writing: 0, pending: 0, firstPending: now });
      } else {
        c.stored = c.start === start ? Math.max(c.stored, r.failures) : r.failures;
        c.start = start;
      }
    }
  }

  private async sweep(): Promise<void> {
    const now = this.clock.now().getTime();
    if (now - this.lastSweep < SWEEP_INTERVAL_MS) return;
    this.lastSweep = now;
    for (const [k, c] of this.counts) if (c.pending === 0 && now - c.start >= this.windowMs) this.counts.delete(k);
    const before = new Date(now - this.windowMs);
    while ((await this.repo.sweep(before, SWEEP_BATCH)) === SWEEP_BATCH);
  }

  /** Makes room for a tenth of MAX_CLIENTS at once, so that a flood from many clients does not pay a scan per new one. */
  private evict(now: number): void {
    const target = MAX_CLIENTS - MAX_CLIENTS / 10;
    for (const [k, c] of this.counts) if (now - c.start >= this.windowMs) this.counts.delete(k);
    // Still full: the oldest windows go (forgetting a count here admits a few more failures until the next read).
    for (const k of this.counts.keys()) {
      if (this.counts.size <= target) break;
      this.counts.delete(k);
    }
  }
}

function key(kind: FailureKind, client: string): string {
  return `${kind} ${client}`;
}

function split(k: string): [FailureKind, string] {
  const i = k.indexOf(' ');
  return [k.slice(0, i) as FailureKind, k.slice(i + 1)];
}
