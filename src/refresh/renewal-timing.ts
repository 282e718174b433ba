import { backoffMs } from '../common/backoff.js';
import { TokenEndpointError, UpstreamTimeoutError, UpstreamUnavailableError } from '../upstream/upstream.errors.js';

/** First retry after a transient failure waits about this long; each further failure doubles it. */
export const RETRY_BASE_MS = 1000;
/** Never wait longer than this between two attempts, however long the outage. */
export const RETRY_CAP_MS = 5 * 60_000;
/** Never retry sooner than this (protects an upstream that is failing fast). */
export const RETRY_FLOOR_MS = 250;

/** The backoff of a connection's renewal after `failures` failed attempts (common/backoff.ts, with equal jitter). */
export function backoffDelayMs(failures: number, random: () => number = Math.random, baseMs = RETRY_BASE_MS, capMs = RETRY_CAP_MS): number {
  return backoffMs(failures, { baseMs, capMs, floorMs: RETRY_FLOOR_MS, random });
}

/**
 * When the scheduler tries again after a transient failure. While the current access token still
 * works, the retry is pulled in to at most half of its remaining life, so several attempts fit before it
 * expires; Retry-After is a floor the upstream asked for, honoured always.
 */
export function retryAt(
  now: Date,
  failures: number,
  expiresAt: Date | null,
  retryAfterSeconds: number | null,
  random: () => number = Math.random,
): Date {
  let delay = backoffDelayMs(failures, random);
  const remaining = expiresAt ? expiresAt.getTime() - now.getTime() : 0;
  if (remaining > 0) delay = Math.min(delay, Math.max(RETRY_FLOOR_MS, Math.floor(remaining / 2)));
  if (retryAfterSeconds !== null) delay = Math.max(delay, retryAfterSeconds * 1000);
  return new Date(now.getTime() + delay);
}

/** True when an on-demand caller must renew before using the token: expired, or within the margin of expiry. */
export function needsRenewal(expiresAt: Date | null, now: Date, marginMs: number): boolean {
  return !expiresAt || expiresAt.getTime() - now.getTime() <= marginMs;
}

export type FailureKind = 'transient' | 'rejected' | 'permanent';

/**
 * What a failed token call means for the grant. Only an explicit invalid_grant kills it; network errors,
 * timeouts, 5xx and 429 say nothing about the grant and are retried; anything else (a misconfigured client,
 * a malformed answer) is retried slowly without blaming the customer's grant.
 */
export function classifyFailure(error: unknown): FailureKind {
  if (error instanceof TokenEndpointError) {
    if (error.isInvalidGrant) return 'rejected';
    return error.isTransient ? 'transient' : 'permanent';
  }
  if (error instanceof UpstreamUnavailableError || error instanceof UpstreamTimeoutError) return 'transient';
  return 'permanent';
}

/** A short description for logs and errors: the error's class and status, never its payload. */
export function describeFailure(error: unknown): string {
  if (error instanceof TokenEndpointError) return `token endpoint ${error.status}${error.error ? ` ${error.error}` : ''}`;
  if (error instanceof Error) return error.name;
  return 'unknown error';
}
