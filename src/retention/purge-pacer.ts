import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/** How a purge is paced (docs/data-retention.md, "Tenant deletion"). */
export interface PacerSettings {
  /** What one batch should take: the next batch's size follows from the last one's time. */
  targetBatchMs: number;
  /** The smallest batch, whatever the pace: the purge always moves on. */
  minRows: number;
  /** The largest batch. */
  maxRows: number;
  /** At most this share of the time in batches: after a batch of d ms the purge rests d·(1 − share)/share. */
  busyShare: number;
  /** A probe slower than this many times the usual one (the median of the recent ones)... */
  slowFactor: number;
  /** ...and slower than it by this much (below it, a difference is noise) means the others are slowed: rest. */
  slowMarginMs: number;
  /** The longest rest before one batch, however slow the probe: the purge finishes under any load. */
  maxRestMs: number;
}

export const PACER_DEFAULTS: Omit<PacerSettings, 'maxRows'> = {
  targetBatchMs: 200,
  minRows: 100,
  busyShare: 0.5,
  slowFactor: 2,
  slowMarginMs: 3,
  maxRestMs: 2000,
};

/**
 * Probes kept: the usual latency is their median, so a lasting change of the machine's load (other work on it)
 * becomes the new usual one within about half of these batches, and a spike stands out against it.
 */
const PROBE_WINDOW = 50;
/** The first rest when the probe is slow; it doubles while it stays slow. */
const FIRST_REST_MS = 50;

/** What a pacer did, for the run's log line and the bench. */
export interface PacerFigures {
  batches: number;
  /** Time rested: after batches (busy share) and while the probe was slow. */
  restedMs: number;
  /** Rests because the probe was slow. */
  slowProbes: number;
  /** The usual probe latency, and the last batch size. */
  usualProbeMs: number;
  rows: number;
}

/**
 * Paces a purge by what it costs the others: each batch is sized from the last one's time (so it takes about
 * `targetBatchMs`, whatever the rows cost on this machine), the purge rests after each batch so that it keeps at most
 * `busyShare` of a connection's time, and before each batch it times a probe query of its own (a pool checkout and a
 * round trip, as the other tenants' requests wait): slower than the usual latency by `slowFactor` and `slowMarginMs`,
 * it rests, doubling the rest while the probe stays slow, up to `maxRestMs` per batch. Then it goes on, so the purge
 * always ends.
 */
export class PurgePacer {
  private rows: number;
  private restMs = 0;
  private readonly probes: number[] = [];
  readonly figures: PacerFigures;

  constructor(
    private readonly s: PacerSettings,
    /** Times the probe query, ms. */
    private readonly probe: () => Promise<number>,
    private readonly rest: (ms: number) => Promise<unknown> = sleep,
  ) {
    this.rows = Math.max(s.minRows, Math.min(s.maxRows, Math.round(s.maxRows / 4)));
    this.figures = { batches: 0, restedMs: 0, slowProbes: 0, usualProbeMs: 0, rows: this.rows };
  }

  /** Before a batch: rests as the last batch and the probe say; answers how many rows the batch takes. */
  async next(): Promise<number> {
    if (this.restMs > 0) await this.pause(this.restMs);
    this.restMs = 0;
    let rest = FIRST_REST_MS;
    let rested = 0;
    for (;;) {
      const ms = await this.probe();
      this.probes.push(ms);
      if (this.probes.length > PROBE_WINDOW) this.probes.shift();
      const usual = median(this.probes);
      this.figures.usualProbeMs = usual;
      const slow = ms > Math.max(usual * this.s.slowFactor, usual + this.s.slowMarginMs);
      if (!slow || rested >= this.s.maxRestMs) break;
      this.figures.slowProbes++;
      const wait = Math.min(rest, this.s.maxRestMs - rested);
      await this.pause(wait);
      rested += wait;
      rest *= 2;
    }
    this.figures.rows = this.rows;
    return this.rows;
  }

  /** After a batch that removed `rows` rows in `ms`: sizes the next one and sets the rest before it. */
  done(rows: number, ms: number): void {
    this.figures.batches++;
    this.restMs = (ms * (1 - this.s.busyShare)) / this.s.busyShare;
    // A batch that found fewer rows than it asked for says nothing of what a full one costs.
    if (rows < this.rows) return;
    const sized = (rows * this.s.targetBatchMs) / Math.max(1, ms);
    this.rows = Math.round(Math.max(this.s.minRows, Math.min(this.s.maxRows, this.rows * 2, Math.max(this.rows / 2, sized))));
  }

  private async pause(ms: number): Promise<void> {
    await this.rest(ms);
    this.figures.restedMs += ms;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Times one probe: `query`'s round trip, ms. */
export async function timeProbe(query: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await query();
  return performance.now() - started;
}
