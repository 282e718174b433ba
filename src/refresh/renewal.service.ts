import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig, CwsEnvironment, EnvironmentName } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { ConnectionEntity } from '../connections/connection.entity.js';
import { ConnectionsRepository } from '../connections/connections.repository.js';
import { eventPayload } from '../connections/connections.service.js';
import { accessTokenRef, refreshDueAt, refreshTokenRef, sealTokens } from '../connections/token-fields.js';
import { EventsRepository } from '../events/events.repository.js';
import { traceRenewal } from '../ops/tracing.js';
import { UpstreamClient } from '../upstream/upstream-client.service.js';
import { TokenEndpointError, UpstreamTimeoutError } from '../upstream/upstream.errors.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { TokenVault, VaultError } from '../vault/token-vault.service.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { type CommitLane, type LeasedConnection, RefreshRepository, type RenewalRow, type RenewedItem } from './refresh.repository.js';
import { backoffDelayMs, classifyFailure, describeFailure, needsRenewal, retryAt } from './renewal-timing.js';

export interface UsableToken {
  accessToken: string;
  version: number;
  expiresAt: Date;
}

/** Why a renewal runs; it decides whether a failed token call is retried while the caller waits. */
type Mode = 'scheduled' | 'on_demand' | 'rejected' | 'forced';

/** Whether the row, as it is now, still needs the renewal its caller asked for. */
type Need = (row: RenewalRow, now: Date) => boolean;

interface Outcome {
  connection: RenewalRow;
  /** The new access token when this renewal produced it (saves opening it again); null otherwise. */
  accessToken: string | null;
}

const REAUTH_REASON = 'refresh_token_rejected';
/** The scheduler renews whatever it claimed: the claim itself checked that the row is due. */
const ALWAYS: Need = () => true;
const INLINE_ATTEMPTS = 3;
const POLL_MIN_MS = 50;
const POLL_JITTER_MS = 50;

/**
 * Renews connections: one at a time per connection across every instance, the new pair committed before
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
  private readonly logger = new Logger(RenewalService.name);
  private readonly inflight = new Map<string, Promise<Outcome>>();
  private closing = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: RefreshRepository,
    private readonly vault: TokenVault,
    private readonly upstream: UpstreamClient,
    private readonly events: EventsRepository,
    private readonly metrics: RefreshMetrics,
    private readonly clock: Clock,
    private readonly connections: ConnectionsRepository,
  ) {}

  async onModuleDestroy(): Promise<void> {
    this.closing = true;
    // A renewal whose token call returned must still reach its COMMIT: wait for it before the pool closes.
    await Promise.allSettled([...this.inflight.values()]);
  }

  /** A usable access token: renews first (shared single-flight) when expired or within config.refresh.onDemandMarginMs of expiry. Throws AppError('reauth_required') for such a connection. */
  async accessTokenFor(connection: ConnectionEntity): Promise<UsableToken> {
    if (connection.status !== 'active') throw reauthRequired();
    const margin = this.config.refresh.onDemandMarginMs;
    if (connection.accessTokenEnc && !needsRenewal(connection.accessTokenExpiresAt, this.clock.now(), margin)) return this.usable(connection, null);
    const need: Need = (row, now) => needsRenewal(row.accessTokenExpiresAt, now, margin);
    try {
      return this.usable(...(await this.ensure(connection.id, need, 'on_demand')));
    } catch (e) {
      // The upstream is in trouble, but a token that has not expired yet still serves this call.
      if (!(e instanceof AppError) || !isUpstreamTrouble(e)) throw e;
      const current = await this.repo.getById(connection.id);
      if (current?.status === 'active' && current.accessTokenExpiresAt && current.accessTokenExpiresAt > this.clock.now()) return this.usable(current, null);
      throw e;
    }
  }

  /** After the upstream answered 401 to `rejectedVersion`'s token: renew unless the row already moved past that version; returns the current token. */
  async renewAfterRejection(connection: ConnectionEntity, rejectedVersion: number): Promise<UsableToken> {
    if (connection.status !== 'active') throw reauthRequired();
    if (connection.version > rejectedVersion && connection.accessTokenEnc && !needsRenewal(connection.accessTokenExpiresAt, this.clock.now(), 0)) {
      return this.usable(connection, null);
    }
    return this.usable(...(await this.ensure(connection.id, (row) => row.version <= rejectedVersion, 'rejected')));
  }

  /** Forced renewal (the POST .../refresh route). */
  async forceRenew(tenantId: string, connectionId: string): Promise<ConnectionEntity> {
    const before = await this.repo.getOwned(tenantId, connectionId);
    if (!before) throw new AppError('connection_not_found', 'No such connection.');
    if (before.status !== 'active') throw reauthRequired();
    await this.ensure(connectionId, (row) => row.version === before.version, 'forced');
    const after = await this.repo.getOwned(tenantId, connectionId);
    if (!after) throw new AppError('connection_not_found', 'No such connection.');
    return after;
  }

  /**
   * Renews a connection the scheduler claimed (its lease is already held), committing the new pair on
   * `lane`, a connection the scheduler reserved before the token call. The promise resolves once the
   * outcome is stored (new pair, backoff, or reauth_required), logged and counted; it never rejects.
   */
  renewClaimed(leased: LeasedConnection, leaseTakenAt: number, lane: CommitLane): Promise<void> {
    const id = leased.connection.id;
    const run = this.recorded(id, () => traceRenewal(leased.connection, leased.environment, 'scheduled', () => this.renewHeld(leased, ALWAYS, 'scheduled', leaseTakenAt, lane)));
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
      const lane = await this.repo.reserveCommitLane();
      try {
        const takenAt = performance.now();
        const leased = await this.repo.tryLease(id, this.config.instanceId, leaseMs);
        if (leased) return await this.recorded(id, () => traceRenewal(leased.connection, leased.environment, mode, () => this.renewHeld(leased, need, mode, takenAt, lane)));
      } finally {
        lane.release();
      }
      const current = await this.repo.getById(id);
      if (!current) throw new AppError('connection_not_found', 'No such connection.');
      if (current.status !== 'active') throw reauthRequired();
      if (!need(current, this.clock.now())) return { connection: current, accessToken: null };
      if (performance.now() > giveUpAt) throw new AppError('service_unavailable', 'The renewal of this connection by another instance did not finish in time.');
      await sleep(POLL_MIN_MS + Math.random() * POLL_JITTER_MS);
    }
  }

  /**
   * Keeps the outcome of a renewal that held the lease in the connection's history and lastError. Written
   * after the fact and never awaited: it neither delays nor fails the renewal (a lost record costs a line of
   * history, not a token).
   */
  private recorded(connectionId: string, renew: () => Promise<Outcome>): Promise<Outcome> {
    const started = performance.now();
    const keep = (outcome: 'renewed' | 'failed' | 'reauth_required', error: string | null) => {
      const record = { at: this.clock.now(), outcome, error, durationMs: Math.round(performance.now() - started) };
      this.connections.recordRenewal(connectionId, record).catch((e: unknown) => {
        this.logger.warn({ connectionId, error: e instanceof Error ? e.name : 'unknown' }, 'could not keep a renewal in the connection history');
      });
    };
    return renew().then(
      (o) => {
        // No new token: someone else's renewal served it (a lost race), not one of ours.
        if (o.accessToken !== null) keep('renewed', null);
        return o;
      },
      (e: unknown) => {
        const code = e instanceof AppError ? e.code : 'internal_error';
        if (code === 'reauth_required') keep('reauth_required', REAUTH_REASON);
        else if (code !== 'connection_not_found') keep('failed', code);
        throw e;
      },
    );
  }

  /** The lease is ours from `takenAt` (a local time no later than the database's); the new pair is committed on `lane`. */
  private async renewHeld(leased: LeasedConnection, need: Need, mode: Mode, takenAt: number, lane: CommitLane): Promise<Outcome> {
    const row = leased.connection;
    const started = performance.now();
    const me = this.config.instanceId;
    let tokens: TokenSet;
    try {
      if (!need(row, this.clock.now())) {
        // Renewed by someone else between our decision and our lease: use theirs.
        await this.repo.releaseLease(row.id, me);
        this.metrics.record('lost_race', seconds(started));
        return { connection: row, accessToken: null };
      }
      const env = this.environmentOf(leased.environment);
      if (!env || !row.refreshTokenEnc) {
        await this.repo.recordFailure(row.id, me, row.version, retryAt(this.clock.now(), row.refreshFailures, row.accessTokenExpiresAt, null));
        this.metrics.record('failure', seconds(started));
        throw new AppError('environment_not_configured', `The environment "${leased.environment ?? ''}" of this connection is not configured.`);
      }
      const refreshToken = this.vault.open(row.refreshTokenEnc, refreshTokenRef(row.id));
      tokens = await this.callTokenEndpoint(row, env, refreshToken, mode, takenAt, started);
    } catch (e) {
      if (e instanceof GrantRejected) return this.onRejected(row, started);
      if (e instanceof VaultError) {
        // The stored refresh token does not open with VAULT_KEYS: nothing was sent. Retrying every tick
        // cannot help until the operator fixes the key ring, so it backs off like any failure (capped at
        // 5 minutes); readiness reports the key id meanwhile (ops/health.service.ts).
        await this.repo.recordFailure(row.id, me, row.version, retryAt(this.clock.now(), row.refreshFailures, null, null)).catch(() => undefined);
        this.metrics.record('failure', seconds(started));
        this.logger.error({ connectionId: row.id, tenantId: row.tenantId, kid: e.kid, failures: row.refreshFailures + 1 }, 'renewal failed: the stored refresh token does not open with VAULT_KEYS; will retry with backoff');
        throw e;
      }
      if (!(e instanceof AppError)) {
        // Nothing was sent, or nothing was spent: the stored refresh token is still the valid one, so the
        // lease can go back. (After a successful token call we never get here.)
        await this.repo.releaseLease(row.id, me).catch(() => undefined);
        this.metrics.record('failure', seconds(started));
        this.logger.error({ connectionId: row.id, tenantId: row.tenantId, error: e instanceof Error ? e.name : 'unknown' }, 'renewal failed before the token call');
      }
      throw e;
    }
    return this.commit(row, tokens, takenAt, started, lane);
  }

  /** One token call, retried while the caller waits only when its token is already unusable. */
  private async callTokenEndpoint(row: RenewalRow, env: CwsEnvironment, refreshToken: string, mode: Mode, takenAt: number, started: number): Promise<TokenSet> {
    const me = this.config.instanceId;
    const worstCall = 2 * this.config.upstream.tokenTimeoutMs + this.config.upstream.connectTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.upstream.refresh(env, refreshToken, { background: mode === 'scheduled' });
      } catch (e) {
        const kind = classifyFailure(e);
        if (kind === 'rejected') throw new GrantRejected();
        const retryAfter = e instanceof TokenEndpointError ? e.retryAfterSeconds : null;
        const delay = Math.max(backoffDelayMs(attempt, Math.random, 200, 2000), (retryAfter ?? 0) * 1000);
        const tokenUnusable = mode === 'rejected' || (mode === 'on_demand' && needsRenewal(row.accessTokenExpiresAt, this.clock.now(), 0));
        const leaseLeft = takenAt + this.config.refresh.leaseMs - performance.now();
        if (kind === 'transient' && tokenUnusable && attempt + 1 < INLINE_ATTEMPTS && leaseLeft > delay + worstCall + 2000) {
          await sleep(delay);
          continue;
        }
        const failures = row.refreshFailures + 1;
        await this.repo.recordFailure(row.id, me, row.version, retryAt(this.clock.now(), row.refreshFailures, row.accessTokenExpiresAt, retryAfter));
        this.metrics.record('failure', seconds(started));
        this.logger.warn({ connectionId: row.id, tenantId: row.tenantId, failure: describeFailure(e), failures, kind }, 'renewal failed; will retry with backoff');
        throw toAppError(e, kind);
      }
    }
  }

  /**
   * The upstream refused the refresh token. If the row moved meanwhile (a reconnect replaced the tokens),
   * that is a lost race, not a revocation; otherwise the connection needs its user again, and the
   * partner hears of it in the same transaction.
   */
  private async onRejected(row: RenewalRow, started: number): Promise<Outcome> {
    const me = this.config.instanceId;
    const marked = await this.repo.transaction(async (m) => {
      const c = await this.repo.markReauthRequired(m, row.id, me, row.version, REAUTH_REASON, this.clock.now());
      if (c) await this.events.record({ tenantId: c.tenantId, source: 'service', type: 'connection.reauth_required', payload: eventPayload('connection.reauth_required', c) }, m);
      return c;
    });
    if (marked) {
      this.metrics.record('reauth_required', seconds(started));
      this.logger.warn({ connectionId: row.id, tenantId: row.tenantId, reason: REAUTH_REASON }, 'the upstream refused the refresh token: the connection needs its user to reconnect');
      throw reauthRequired();
    }
    this.metrics.record('lost_race', seconds(started));
    await this.repo.releaseLease(row.id, me).catch(() => undefined);
    const current = await this.repo.getById(row.id);
    if (!current) throw new AppError('connection_not_found', 'No such connection.');
    if (current.status !== 'active') throw reauthRequired();
    return { connection: current, accessToken: null };
  }

  /**
   * Saves the new pair before anyone may use it, at once, on the lane reserved for it: the refresh token we
   * sent is spent, so until this COMMIT the pair exists only in this process's memory, and nothing (a pool
   * queue, a group commit) may stand in between. Giving up loses the grant: database errors are retried with
   * backoff (on the shared pool) for as long as our lease keeps others away.
   */
  private async commit(row: RenewalRow, tokens: TokenSet, takenAt: number, started: number, lane: CommitLane): Promise<Outcome> {
    const me = this.config.instanceId;
    const now = this.clock.now();
    const sealed = sealTokens(this.vault, row.id, tokens);
    const item: RenewedItem = {
      id: row.id,
      tenantId: row.tenantId,
      version: row.version,
      accessTokenEnc: sealed.accessTokenEnc,
      refreshTokenEnc: sealed.refreshTokenEnc,
      accessTokenExpiresAt: new Date(now.getTime() + tokens.expiresIn * 1000),
      refreshDueAt: refreshDueAt(now, tokens.expiresIn, this.config.refresh.at),
      now,
    };
    const saveUntil = takenAt + this.config.refresh.leaseMs - 500;
    for (let attempt = 0; ; attempt++) {
      try {
        const saved = attempt === 0 ? await lane.save(me, item) : await this.repo.saveRenewed(me, item);
        if (saved) {
          this.metrics.record('success', seconds(started));
          // The CAS matched our version and lease, so the row now holds exactly what we wrote on top of what we read.
          const renewed: RenewalRow = {
            ...row,
            accessTokenEnc: item.accessTokenEnc,
            refreshTokenEnc: item.refreshTokenEnc,
            accessTokenExpiresAt: item.accessTokenExpiresAt,
            refreshFailures: 0,
            version: row.version + 1,
          };
          return { connection: renewed, accessToken: tokens.accessToken };
        }
        const current = await this.repo.getById(row.id);
        if (current && current.accessTokenEnc === item.accessTokenEnc) {
          // An earlier attempt committed but its answer was lost.
          this.metrics.record('success', seconds(started));
          return { connection: current, accessToken: tokens.accessToken };
        }
        // A reconnect or a delete replaced the row while we renewed: its tokens are newer than ours.
        this.metrics.record('lost_race', seconds(started));
        this.logger.warn({ connectionId: row.id, tenantId: row.tenantId }, 'the connection changed during its renewal; the renewed pair was discarded');
        if (!current) throw new AppError('connection_not_found', 'No such connection.');
        if (current.status !== 'active') throw reauthRequired();
        return { connection: current, accessToken: null };
      } catch (e) {
        if (e instanceof AppError) throw e;
        if (attempt === 0) lane.release(true);
        const delay = backoffDelayMs(attempt, Math.random, 100, 2000);
        const code = (e as { code?: unknown }).code;
        if (performance.now() + delay >= saveUntil) {
          this.metrics.record('failure', seconds(started));
          this.logger.error(
            { connectionId: row.id, tenantId: row.tenantId, attempts: attempt + 1, error: e instanceof Error ? e.name : 'unknown', code },
            'LOST A ROTATED TOKEN PAIR: the upstream renewed this connection but the database refused the new pair until the lease ran out; the connection will need its user to reconnect',
          );
          throw new AppError('service_unavailable', 'The renewed connection could not be saved.');
        }
        this.logger.error({ connectionId: row.id, tenantId: row.tenantId, attempt: attempt + 1, error: e instanceof Error ? e.name : 'unknown', code }, 'saving a renewed token pair failed; retrying');
        await sleep(delay);
      }
    }
  }

  private usable(connection: RenewalRow, accessToken: string | null): UsableToken {
    if (connection.status !== 'active') throw reauthRequired();
    if (!connection.accessTokenEnc || !connection.accessTokenExpiresAt) throw reauthRequired();
    return {
      accessToken: accessToken ?? this.vault.open(connection.accessTokenEnc, accessTokenRef(connection.id)),
      version: connection.version,
      expiresAt: connection.accessTokenExpiresAt,
    };
  }

  private environmentOf(name: string | null): CwsEnvironment | undefined {
    return name ? this.config.environments[name as EnvironmentName] : undefined;
  }
}

/** invalid_grant from the token endpoint, handled by onRejected. */
class GrantRejected extends Error {}

function reauthRequired(): AppError {
  return new AppError('reauth_required', 'The connection must be authorized again by its user.');
}

function isUpstreamTrouble(e: AppError): boolean {
  return e.code === 'upstream_unavailable' || e.code === 'upstream_timeout' || e.code === 'upstream_error' || e.code === 'service_unavailable';
}

function toAppError(e: unknown, kind: 'transient' | 'permanent'): AppError {
  if (e instanceof UpstreamTimeoutError) return new AppError('upstream_timeout', 'The upstream token endpoint did not answer in time.');
  if (kind === 'transient') return new AppError('upstream_unavailable', 'The upstream token endpoint is unavailable; the renewal will be retried.');
  return new AppError('upstream_error', `The upstream token endpoint refused the renewal (${describeFailure(e)}).`);
}

function seconds(since: number): number {
  return (performance.now() - since) / 1000;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
