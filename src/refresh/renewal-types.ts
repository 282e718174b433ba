import { performance } from 'node:perf_hooks';
import { AppError } from '../common/app-error.js';
import type { RenewalRow } from '../connections/store/renewal-lease.repository.js';

/** Why a renewal runs; it decides whether a failed token call is retried while the caller waits. */
export type Mode = 'scheduled' | 'on_demand' | 'rejected' | 'forced';

/** Whether the row, as it is now, still needs the renewal its caller asked for. */
export type Need = (row: RenewalRow, now: Date) => boolean;

export interface Outcome {
  connection: RenewalRow;
  /** The new access token when this renewal produced it (saves opening it again); null otherwise. */
  accessToken: string | null;
}

/** invalid_grant from the token endpoint: the refresh token is dead. */
export class GrantRejected extends Error {
  constructor() {
    super('the upstream refused the refresh token');
    this.name = 'GrantRejected';
  }
}

export const REAUTH_REASON = 'refresh_token_rejected';

/** A stored token of the connection does not open (damaged, or restored from another installation). */
export const UNREADABLE_REASON = 'token_unreadable';

/**
 * 409 reauth_required, like a refused refresh token: the partner can act on it (the user connects again and
 * new tokens are sealed), and clients that handle reauth_required already do the right thing.
 */
export function tokensUnreadable(): AppError {
  return new AppError('reauth_required', "The connection's stored tokens cannot be read: it must be authorized again by its user.", {
    reason: UNREADABLE_REASON,
  });
}

/** This instance's key ring lacks the key of a stored token that other instances hold (a rotation under way): retry. */
export function ringBehind(): AppError {
  return new AppError('service_unavailable', "This instance does not hold the key of this connection's tokens yet; retry.");
}

/** The reason a reauth_required error carries (its details), else the refused refresh token's. */
export function reauthReasonOf(e: AppError): string {
  const reason = e.details?.reason;
  return typeof reason === 'string' ? reason : REAUTH_REASON;
}

export function reauthRequired(): AppError {
  return new AppError('reauth_required', 'The connection must be authorized again by its user.');
}

export function connectionNotFound(): AppError {
  return new AppError('connection_not_found', 'No such connection.');
}

export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
