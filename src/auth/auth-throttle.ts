import type { IncomingMessage } from 'node:http';
import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { ClientAddress } from './client-address.js';
import { FailureCounts } from './failure-counts.js';

/** Everyone together, for the overall bound on sign-ins. */
const ALL_CLIENTS = '*';

/**
 * How much a client's failed credentials cost it (docs/security.md, "Credential guessing"). Counted per client in
 * FailureCounts (shared by every instance); `401`/`403` answers count, other outcomes (an unknown tenant, a
 * database outage) are no guess and do not.
 *
 * A defence that is never a weapon: on the API, a client past its bound loses only the answers to its *wrong*
 * credentials, which become `429` with Retry-After; a right one still passes, so a flood of wrong keys from an
 * address (a NAT, a proxy, a partner's backend with one revoked key) costs the right keys beside it nothing.
 * Console sign-in keeps a lockout (a person may type the operator key there): past its bound, every attempt is
 * refused unchecked; it counts apart from the API, so a locked sign-in never stops API calls or open sessions.
 */
@Injectable()
export class AuthThrottle {
  constructor(
    private readonly counts: FailureCounts,
    private readonly clients: ClientAddress,
  ) {}

  /**
   * Runs the check of an API credential (a key, a console session). `pastBound` tells it the client is past its
   * bound, so a lookup the check needs may share its query with others' (the cheap lane: BatchedLookup); a right
   * credential passes either way. A failure is counted, or, past the bound, answered `429` instead.
   */
  async apiCredential<T>(req: IncomingMessage, check: (pastBound: boolean) => Promise<T>): Promise<T> {
    const client = this.clients.of(req);
    try {
      return await check(this.counts.waitFor('api_key', client) > 0);
    } catch (e) {
      if (!isGuess(e)) throw e;
      // Decided when the failure is known: of failures in flight together, the ones past the bound are refused.
      const wait = this.counts.waitFor('api_key', client);
      if (wait > 0) throw tooManyFailures(wait);
      this.counts.add('api_key', client);
      throw e;
    }
  }

  /** Runs a console sign-in's check: refused unchecked while the client, or every client together, is past its bound. */
  async signIn<T>(req: IncomingMessage, check: () => Promise<T>): Promise<T> {
    const client = this.clients.of(req);
    const waitNow = this.signInWait(client);
    if (waitNow > 0) throw tooManyFailures(waitNow);
    try {
      return await check();
    } catch (e) {
      if (!isGuess(e)) throw e;
      const wait = this.signInWait(client);
      if (wait > 0) throw tooManyFailures(wait);
      this.counts.add('sign_in', client);
      this.counts.add('sign_in_all', ALL_CLIENTS);
      throw e;
    }
  }

  private signInWait(client: string): number {
    return Math.max(this.counts.waitFor('sign_in', client), this.counts.waitFor('sign_in_all', ALL_CLIENTS));
  }
}

function isGuess(e: unknown): boolean {
  return e instanceof AppError && (e.code === 'unauthorized' || e.code === 'forbidden');
}

function tooManyFailures(wait: number): AppError {
  return new AppError(
    'too_many_requests',
    'Too many failed credentials from this client: retry after the time in Retry-After.',
    undefined,
    wait,
  );
}
