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
