import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { ConnectionHealthRepository } from '../connections/store/connection-health.repository.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { type LeasedConnection, RenewalLeaseRepository, type RenewalRow } from '../connections/store/renewal-lease.repository.js';
import type { CommitLane } from '../connections/store/renewal-save.repository.js';
import { ConnectionsService } from '../connections/connections.service.js';
import { ConnectionTokens } from '../connections/connection-tokens.js';
import { traceRenewal } from '../telemetry/operation-spans.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { VaultError } from '../vault/token-vault.service.js';
import { PairCommit } from './pair-commit.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { retryAt } from './renewal-timing.js';
import {
  connectionNotFound,
  GrantRejected,
  type Mode,
  type Need,
  type Outcome,
  REAUTH_REASON,
  reauthReasonOf,
  reauthRequired,
  ringBehind,
  secondsSince,
  tokensUnreadable,
  UNREADABLE_REASON,
} from './renewal-types.js';
import { TokenCall } from './token-call.js';

/**
 * One renewal of a connection whose lease this instance holds: decide it is still needed, call the token
 * endpoint, commit the new pair (or store the failure, or mark the connection reauth_required), and keep
 * the outcome in the connection's history. The lease is released by whatever ends the attempt.
 */
@Injectable()
export class RenewalAttempt {
  private readonly logger = new Logger(RenewalAttempt.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: ConnectionsRepository,
    private readonly leases: RenewalLeaseRepository,
    private readonly health: ConnectionHealthRepository,
    private readonly connections: ConnectionsService,
    private readonly tokens: ConnectionTokens,
    private readonly environments: Environments,
    private readonly tokenCall: TokenCall,
    private readonly pairCommit: PairCommit,
    private readonly metrics: RefreshMetrics,
    private readonly clock: Clock,
  ) {}

  /** The lease is ours from `takenAt` (a local time no later than the database's); the new pair is committed on `lane`. */
  run(leased: LeasedConnection, need: Need, mode: Mode, takenAt: number, lane: CommitLane): Promise<Outcome> {
    return this.recorded(leased.connection.id, () =>
      traceRenewal(leased.connection, leased.environment, mode, () => this.renew(leased, need, mode, takenAt, lane)),
    );
  }

  private async renew(leased: LeasedConnection, need: Need, mode: Mode, takenAt: number, lane: CommitLane): Promise<Outcome> {
    const row = leased.connection;
    const started = performance.now();
    const me = this.config.instanceId;
    let tokens: TokenSet;
    try {
      if (!need(row, this.clock.now())) {
        // Renewed by someone else between our decision and our lease: use theirs.
        await this.leases.releaseLease(row.id, me);
        this.metrics.record('lost_race', secondsSince(started));
        return { connection: row, accessToken: null };
      }
      const env = this.environments.find(leased.environment);
      if (!env || !row.refreshTokenEnc) {
        await this.leases.recordFailure(
          row.id,
          me,
          row.version,
          retryAt(this.clock.now(), row.refreshFailures, row.accessTokenExpiresAt, null),
        );
        this.metrics.record('failure', secondsSince(started));
        throw this.environments.notConfigured(leased.environment);
      }
      const refreshToken = await this.tokens.openRefreshToken({ id: row.id, tenantId: row.tenantId, refreshTokenEnc: row.refreshTokenEnc });
      // The new pair must be sealable once the upstream has issued it (a spent refresh token cannot be asked again):
      // the tenant's data key is loaded now, or the renewal stops here with 503 key_store_unavailable.
      await this.tokens.prepareSeal(row);
      tokens = await this.tokenCall.call(row, env, refreshToken, mode, takenAt, started);
    } catch (e) {
      if (e instanceof GrantRejected) return this.onRejected(row, started);
      if (e instanceof VaultError) return this.onUnreadable(row, e, started);
      if (!(e instanceof AppError) || e.code === 'key_store_unavailable') {
        // Nothing was sent, or nothing was spent: the stored refresh token is still the valid one, so the
        // lease can go back. (After a successful token call we never get here.)
        await this.leases.releaseLease(row.id, me).catch(() => undefined);
        this.metrics.record('failure', secondsSince(started));
        this.logger.error(
          { connectionId: row.id, tenantId: row.tenantId, error: e instanceof Error ? e.name : 'unknown' },
          'renewal failed before the token call',
        );
      }
      throw e;
    }
    return this.pairCommit.commit(row, tokens, takenAt, started, lane);
  }

  /**
   * The upstream refused the refresh token. If the row moved meanwhile (a reconnect replaced the tokens),
   * that is a lost race, not a revocation; otherwise the connection needs its user again.
   */
  private async onRejected(row: RenewalRow, started: number): Promise<Outcome> {
    const me = this.config.instanceId;
    const marked = await this.connections.markReauthRequired(row.id, me, row.version, REAUTH_REASON);
    if (marked) {
      this.metrics.record('reauth_required', secondsSince(started));
      this.logger.warn(
        { connectionId: row.id, tenantId: row.tenantId, reason: REAUTH_REASON },
        'the upstream refused the refresh token: the connection needs its user to reconnect',
      );
      throw reauthRequired();
    }
    return this.lostRace(row, started);
  }

  /**
   * A stored token of the connection (its access token, for a call) does not open: the same as a refresh
   * token that does not open in a renewal (onUnreadable), kept in the connection's history. Resolves with the
   * current row only when the row moved meanwhile (its tokens were replaced): the caller tries that one.
   */
  unreadable(row: RenewalRow, e: VaultError): Promise<Outcome> {
    if (e.ringBehind) return Promise.reject(ringBehind());
    return this.recorded(row.id, () => this.onUnreadable(row, e, performance.now()));
  }

  /**
   * A stored token does not open (the vault counted and logged it): nothing was sent upstream. Under a key
   * this instance's ring lacks but other instances hold, the ring is behind, not the row: 503, retried, nothing
   * marked. Otherwise the row is damaged or foreign, and only a new grant can replace it: the connection is
   * marked reauth_required (token_unreadable) and the partner hears of it. The key ring itself was checked at
   * start (vault-key-check.service.ts), so a wrong ring cannot get here and mark every connection.
   */
  private async onUnreadable(row: RenewalRow, e: VaultError, started: number): Promise<Outcome> {
    const me = this.config.instanceId;
    if (e.ringBehind) {
      // Backs off like any failure (capped at 5 minutes) rather than every tick, until this ring catches up.
      await this.leases
        .recordFailure(row.id, me, row.version, retryAt(this.clock.now(), row.refreshFailures, null, null))
        .catch(() => undefined);
      this.metrics.record('failure', secondsSince(started));
      throw ringBehind();
    }
    const marked = await this.connections.markTokensUnreadable(row.id, row.version, UNREADABLE_REASON);
    if (marked) {
      this.metrics.record('reauth_required', secondsSince(started));
      throw tokensUnreadable();
    }
    // The row moved since it was read (a reconnect or a renewal replaced its tokens): a lost race.
    return this.lostRace(row, started);
  }

  /** The row moved since it was read: the lease goes back, and the caller gets the row as it is now. */
  private async lostRace(row: RenewalRow, started: number): Promise<Outcome> {
    this.metrics.record('lost_race', secondsSince(started));
    await this.leases.releaseLease(row.id, this.config.instanceId).catch(() => undefined);
    const current = await this.repo.findInAnyTenant(row.id);
    if (!current) throw connectionNotFound();
    if (current.status !== 'active') throw reauthRequired();
    return { connection: current, accessToken: null };
  }

  /**
   * Keeps the outcome of a renewal that held the lease in the connection's history and lastError. A renewed
   * pair's line is written by the statement that saves the pair (RenewalSaveRepository, with the time until
   * the pair was handed to it); any other outcome is written after the fact and never awaited: it neither
   * delays nor fails the renewal (a lost record costs a line of history, not a token).
   */
  private recorded(connectionId: string, renew: () => Promise<Outcome>): Promise<Outcome> {
    const started = performance.now();
    const keep = (outcome: 'failed' | 'reauth_required', error: string) => {
      const record = { at: this.clock.now(), outcome, error, durationMs: Math.round(performance.now() - started) };
      this.health.recordRenewal(connectionId, record).catch((e: unknown) => {
        this.logger.warn(
          { connectionId, error: e instanceof Error ? e.name : 'unknown' },
          'could not keep a renewal in the connection history',
        );
      });
    };
    // A new token was saved together with its line; an outcome without one is someone else's renewal (a lost race).
    return renew().catch((e: unknown) => {
      const code = e instanceof AppError ? e.code : 'internal_error';
      if (code === 'reauth_required') keep('reauth_required', reauthReasonOf(e as AppError));
      else if (code !== 'connection_not_found') keep('failed', code);
      throw e;
    });
  }
}
