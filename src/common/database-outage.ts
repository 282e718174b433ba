import { Logger } from '@nestjs/common';

/** What a client is told to wait before retrying while the database is unreachable (Retry-After, seconds). */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

// SQLSTATE classes and codes that mean "the database cannot serve right now", not "this statement is wrong":
// 08 connection exception; 57P01-57P03 admin/crash shutdown, cannot connect now (starting up, shutting down,
// in recovery); 53300 too many connections.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);
// pg and pg-pool say these with plain Errors, without a code.
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
  /^Cannot use a pool after calling end on the pool$/,
];

/**
 * Whether an error means the database could not be reached or dropped the connection (as opposed to a
 * statement it refused). Looks at the error and at TypeORM's `driverError`, never at an arbitrary `cause`:
 * an upstream connection refused is wrapped in an upstream error and must not read as a database outage.
 */
export function isDatabaseUnavailable(e: unknown): boolean {
  if (typeof e !== 'object' || e === null) return false;
  const driverError = (e as { driverError?: unknown }).driverError;
  if (driverError !== undefined && driverError !== e && isDatabaseUnavailable(driverError)) return true;
  const { code, syscall, message } = e as { code?: unknown; syscall?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (code.startsWith('08') && code.length === 5) return true;
    if (UNAVAILABLE_SQLSTATES.has(code)) return true;
    // A socket error of the database client carries its syscall (connect, getaddrinfo, read, write); an
    // aborted HTTP request also says ECONNRESET, without one.
    if (NETWORK_CODES.has(code) && typeof syscall === 'string') return true;
    if (NETWORK_CODES.has(code) && e instanceof AggregateError) return true;
  }
  return typeof message === 'string' && UNAVAILABLE_MESSAGES.some((m) => m.test(message));
}

/** A short, secret-free description for a log line: the code, or the error's name. */
export function describeDatabaseError(e: unknown): string {
  const driverError = (e as { driverError?: unknown } | null)?.driverError;
  const source = (driverError ?? e) as { code?: unknown; name?: unknown; message?: unknown } | null;
  const code = typeof source?.code === 'string' ? source.code : null;
  const name = typeof source?.name === 'string' ? source.name : 'Error';
  const message = typeof source?.message === 'string' ? source.message.replace(/postgres(ql)?:\/\/[^\s]*/g, '<url>').slice(0, 200) : '';
  return [code, name !== 'Error' ? name : null, message].filter(Boolean).join(' ');
}

type Probe = () => Promise<unknown>;

/**
 * The database outage, as the logs tell it: one line when it begins, one summary line every `summaryMs` while
 * it lasts (how many requests were answered 503 and how many background tasks failed meanwhile), one line
 * when it ends. Recovery is noticed by probes (the health check's `SELECT 1`), tried every `probeMs` while
 * the outage lasts, or by a probe that succeeds on its own (a readiness check).
 */
export class DatabaseOutage {
  private since: number | null = null;
  private requests = 0;
  private background = 0;
  private requestsReported = 0;
  private backgroundReported = 0;
  private lastSummaryAt = 0;
  private probing = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly probes = new Set<Probe>();

  constructor(
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly summaryMs = 10_000,
    private readonly probeMs = 1000,
  ) {}

  get active(): boolean {
    return this.since !== null;
  }

  /** A request answered 503, or a background task that failed, because the database is unreachable. */
  report(e: unknown, what: 'request' | 'background'): void {
    if (what === 'request') this.requests++;
    else this.background++;
    if (this.since !== null) return;
    this.since = Date.now();
    this.lastSummaryAt = this.since;
    this.logger.warn(
      { error: describeDatabaseError(e) },
      `the database is unreachable: requests are answered 503 service_unavailable (Retry-After: ${DATABASE_RETRY_AFTER_SECONDS}) until it is back`,
    );
    this.timer = setInterval(() => void this.tick(), this.probeMs);
    this.timer.unref();
  }

  /** The database answered again. */
  recovered(): void {
    if (this.since === null) return;
    const seconds = Math.round((Date.now() - this.since) / 100) / 10;
    this.logger.warn(
      { outageSeconds: seconds, requestsRefused: this.requests, backgroundFailures: this.background },
      `the database is reachable again after ${seconds} s (${this.requests} requests were answered 503 meanwhile)`,
    );
    this.since = null;
    this.requests = this.background = this.requestsReported = this.backgroundReported = 0;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Registers a probe (a `SELECT 1`); returns its removal. */
  watch(probe: Probe): () => void {
    this.probes.add(probe);
    return () => this.probes.delete(probe);
  }

  private async tick(): Promise<void> {
    if (this.since === null) return;
    const now = Date.now();
    if (now - this.lastSummaryAt >= this.summaryMs) {
      const requests = this.requests - this.requestsReported;
      const background = this.background - this.backgroundReported;
      this.requestsReported = this.requests;
      this.backgroundReported = this.background;
      this.lastSummaryAt = now;
      this.logger.warn(
        { outageSeconds: Math.round((now - this.since) / 1000), requestsRefused: requests, backgroundFailures: background },
        `the database is still unreachable: ${requests} requests answered 503 in the last ${Math.round(this.summaryMs / 1000)} s`,
      );
    }
    if (this.probing || this.probes.size === 0) return;
    this.probing = true;
    try {
      await Promise.any([...this.probes].map((p) => p()));
      this.recovered();
    } catch {
      /* still down */
    } finally {
      this.probing = false;
    }
  }
}

/** The process's one outage record: the exception filter, the facade's fast lane, the scheduler and the health check share it. */
export const databaseOutage = new DatabaseOutage(new Logger('Database'));
