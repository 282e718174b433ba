import { performance } from 'node:perf_hooks';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { type LeasedConnection, RenewalLeaseRepository, type RenewalRow } from '../connections/store/renewal-lease.repository.js';
import { type CommitLane, RenewalSaveRepository } from '../connections/store/renewal-save.repository.js';
import { ConnectionTokens } from '../connections/connection-tokens.js';
import { VaultError } from '../vault/token-vault.service.js';
import { RenewalAttempt } from './renewal-attempt.js';
import { needsRenewal } from './renewal-timing.js';
import { connectionNotFound, type Mode, type Need, type Outcome, reauthRequired, sleep } from './renewal-types.js';

export interface UsableToken {
  accessToken: string;
  version: number;
  expiresAt: Date;
}

/** The scheduler renews whatever it claimed: the claim itself checked that the row is due. */
const ALWAYS: Need = () => true;
const POLL_MIN_MS = 50;
const POLL_JITTER_MS = 50;

/**
 * Renews connections (the attempt itself: renewal-attempt.ts, its token call and its commit beside it): one at a time per connection across every instance, the new pair committed before
 * its access token is used, a used refresh token never sent again (ARCHITECTURE.md invariants 3 to 5).
 *
 * Within a process, callers for the same connection share one promise. Across processes, a lease in the
 * connections row decides: UPDATE ... WHERE the lease is free takes it atomically, the taker re-reads the
 * row it got (another instance may have renewed just before), and commits the new pair with a
 * compare-and-swap on the row's version and its own lease. Everyone else polls the row until the version
 * moves.
 *
 * Limits, stated plainly: the lease is a time lease. Config keeps REFRESH_LEASE_MS above twice the token
 * timeout, so a token call cannot outlive it, and a claimed row whose lease aged is re-extended before its
 * call starts; but a process frozen (GC pause, SIGSTOP, VM migration) longer than the lease can wake up
 * after another instance took over, and its token call then sends a refresh token the other instance may
 * be sending too. The CAS makes sure only one pair is ever stored, not that the upstream saw one request.
 * The other gap cannot be closed from our side at all: when the upstream has rotated the pair and the
 * answer is lost on the wire, or this process dies before its COMMIT, the only valid refresh token is one
 * we never stored (the upstream offers no idempotent refresh); that connection ends in reauth_required
 * with its reason, never in a silent loop of failures.
 */
@Injectable()
export class RenewalService implements OnModuleDestroy {
  private readonly inflight = new Map<string, Promise<Outcome>>();
  private closing = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: ConnectionsRepository,
    private readonly leases: RenewalLeaseRepository,
    private readonly saves: RenewalSaveRepository,
    private readonly tokens: ConnectionTokens,
    private readonly attempt: RenewalAttempt,
    private readonly clock: Clock,
  ) {}

  async onModuleDestroy(): Promise<void> {
    this.closing = true;
    await this.settle();
  }

  /** Resolves once every renewal in flight stored its outcome: one whose token call returned must still reach its COMMIT before its lease is released or the pool closes. */
  async settle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight.values()]);
  }

  /** A usable access token: renews first (shared single-flight) when expired or within config.refresh.onDemandMarginMs of expiry. Throws AppError('reauth_required') for such a connection. */
  async accessTokenFor(connection: ConnectionEntity): Promise<UsableToken> {
    if (connection.status !== 'active') throw reauthRequired();
    const margin = this.config.refresh.onDemandMarginMs;
    if (connection.accessTokenEnc && !needsRenewal(connection.accessTokenExpiresAt, this.clock.now(), margin))
      return this.usable(connection, null);
    const need: Need = (row, now) => needsRenewal(row.accessTokenExpiresAt, now, margin);
    try {
      return this.usable(...(await this.ensure(connection.id, need, 'on_demand')));
    } catch (e) {
      // The upstream is in trouble, but a token that has not expired yet still serves this call.
      if (!(e instanceof AppError) || !isUpstreamTrouble(e)) throw e;
      const current = await this.repo.findInAnyTenant(connection.id);
      if (current?.status === 'active' && current.accessTokenExpiresAt && current.accessTokenExpiresAt > this.clock.now())
        return this.usable(current, null);
      throw e;
    }
  }

  /** After the upstream answered 401 to `rejectedVersion`'s token: renew unless the row already moved past that version; returns the current token. */
  async renewAfterRejection(connection: ConnectionEntity, rejectedVersion: number): Promise<UsableToken> {
    if (connection.status !== 'active') throw reauthRequired();
    if (
      connection.version > rejectedVersion &&
      connection.accessTokenEnc &&
      !needsRenewal(connection.accessTokenExpiresAt, this.clock.now(), 0)
    ) {
      return this.usable(connection, null);
    }
    return this.usable(...(await this.ensure(connection.id, (row) => row.version <= rejectedVersion, 'rejected')));
  }

  /** Forced renewal (the POST .../refresh route). */
  async forceRenew(tenantId: string, connectionId: string): Promise<ConnectionEntity> {
    const before = await this.repo.findInTenant(tenantId, connectionId);
    if (!before) throw connectionNotFound();
    if (before.status !== 'active') throw reauthRequired();
    await this.ensure(connectionId, (row) => row.version === before.version, 'forced');
    const after = await this.repo.findInTenant(tenantId, connectionId);
    if (!after) throw connectionNotFound();
    return after;
  }

  /**
   * Renews a connection the scheduler claimed (its lease is already held), committing the new pair on
   * `lane`, the hold on the commit lane the scheduler took before the token call. The promise resolves once the
   * outcome is stored (new pair, backoff, or reauth_required), logged and counted; it never rejects.
   */
  renewClaimed(leased: LeasedConnection, leaseTakenAt: number, lane: CommitLane): Promise<void> {
    const id = leased.connection.id;
    const run = this.attempt.run(leased, ALWAYS, 'scheduled', leaseTakenAt, lane);
    // On-demand callers in this process share it instead of polling the row until the lease is released.
    const shared = !this.inflight.has(id);
    if (shared) this.inflight.set(id, run);
    const settle = () => {
      if (shared && this.inflight.get(id) === run) this.inflight.delete(id);
    };
    return run.then(settle, settle);
  }

  /** Shares an in-flight renewal; a caller whose need the shared one did not meet (it had another reason) gets one more round. */
  private async ensure(id: string, need: Need, mode: Mode): Promise<[RenewalRow, string | null]> {
    let outcome = await this.shared(id, need, mode);
    if (need(outcome.connection, this.clock.now())) outcome = await this.shared(id, need, mode);
    return [outcome.connection, outcome.accessToken];
  }

  private shared(id: string, need: Need, mode: Mode): Promise<Outcome> {
    const existing = this.inflight.get(id);
    if (existing) return existing;
    const run = this.acquireAndRenew(id, need, mode);
    this.inflight.set(id, run);
    void run.finally(() => this.inflight.get(id) === run && this.inflight.delete(id)).catch(() => undefined);
    return run;
  }

  /** Takes the lease, or waits for the instance that holds it to finish, then re-checks the need. */
  private async acquireAndRenew(id: string, need: Need, mode: Mode): Promise<Outcome> {
    const { leaseMs } = this.config.refresh;
    const giveUpAt = performance.now() + leaseMs + 5000;
    for (;;) {
      if (this.closing) throw new AppError('service_unavailable', 'The service is shutting down.');
      // Reserved before the lease and the token call: waiting for it spends nothing.
      const lane = await this.saves.reserveCommitLane();
      try {
        const takenAt = performance.now();
        const leased = await this.leases.tryLease(id, this.config.instanceId, leaseMs);
        if (leased) return await this.attempt.run(leased, need, mode, takenAt, lane);
      } finally {
        lane.release();
      }
      const current = await this.repo.findInAnyTenant(id);
      if (!current) throw connectionNotFound();
      if (current.status !== 'active') throw reauthRequired();
      if (!need(current, this.clock.now())) return { connection: current, accessToken: null };
      if (performance.now() > giveUpAt)
        throw new AppError('service_unavailable', 'The renewal of this connection by another instance did not finish in time.');
      await sleep(POLL_MIN_MS + Math.random() * POLL_JITTER_MS);
    }
  }

  private async usable(connection: RenewalRow, accessToken: string | null): Promise<UsableToken> {
    if (connection.status !== 'active') throw reauthRequired();
    if (!connection.accessTokenEnc || !connection.accessTokenExpiresAt) throw reauthRequired();
    let token = accessToken;
    try {
      token ??= await this.tokens.openAccessToken({
        id: connection.id,
        tenantId: connection.tenantId,
        accessTokenEnc: connection.accessTokenEnc,
      });
    } catch (e) {
      if (!(e instanceof VaultError)) throw e;
      // Marks the connection (renewal-attempt.ts); comes back only when its tokens were replaced meanwhile.
      return this.usable((await this.attempt.unreadable(connection, e)).connection, null);
    }
    return { accessToken: token, version: connection.version, expiresAt: connection.accessTokenExpiresAt };
  }
}

function isUpstreamTrouble(e: AppError): boolean {
  return (
    e.code === 'upstream_unavailable' || e.code === 'upstream_timeout' || e.code === 'upstream_error' || e.code === 'service_unavailable'
  );
}
