import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { RenewalRow } from '../connections/store/renewal-lease.repository.js';
import { type CommitLane, type RenewedItem, RenewalSaveRepository } from '../connections/store/renewal-save.repository.js';
import { ConnectionTokens } from '../connections/connection-tokens.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { backoffDelayMs } from './renewal-timing.js';
import { connectionNotFound, type Outcome, reauthRequired, secondsSince, sleep } from './renewal-types.js';

/**
 * Saves a renewed pair before anyone may use it, the moment it arrives, on the commit lane held for it: the
 * refresh token we sent is spent, so until this COMMIT the pair exists only in this process's memory, and
 * nothing but the one commit already in flight on the lane (no pool queue, no timer) may stand in between.
 * Giving up loses the grant: database errors are retried with backoff (on the shared pool) for as long as our
 * lease keeps others away.
 */
@Injectable()
export class PairCommit {
  private readonly logger = new Logger(PairCommit.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: ConnectionsRepository,
    private readonly saves: RenewalSaveRepository,
    private readonly tokens: ConnectionTokens,
    private readonly metrics: RefreshMetrics,
    private readonly clock: Clock,
  ) {}

  async commit(row: RenewalRow, tokens: TokenSet, takenAt: number, started: number, lane: CommitLane): Promise<Outcome> {
    const me = this.config.instanceId;
    const item: RenewedItem = {
      id: row.id,
      tenantId: row.tenantId,
      version: row.version,
      ...(await this.tokens.fields(row, tokens, this.clock.now())),
      // The renewal's line in the history, written by the save with the pair.
      durationMs: Math.round(performance.now() - started),
    };
    const saveUntil = takenAt + this.config.refresh.leaseMs - 500;
    for (let attempt = 0; ; attempt++) {
      try {
        const saved = attempt === 0 ? await lane.save(me, item) : await this.saves.saveRenewed(me, item);
        if (saved) {
          this.metrics.record('success', secondsSince(started));
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
        const current = await this.repo.findInAnyTenant(row.id);
        if (current && current.accessTokenEnc === item.accessTokenEnc) {
          // An earlier attempt committed but its answer was lost.
          this.metrics.record('success', secondsSince(started));
          return { connection: current, accessToken: tokens.accessToken };
        }
        // A reconnect or a delete replaced the row while we renewed: its tokens are newer than ours.
        this.metrics.record('lost_race', secondsSince(started));
        this.logger.warn(
          { connectionId: row.id, tenantId: row.tenantId },
          'the connection changed during its renewal; the renewed pair was discarded',
        );
        if (!current) throw connectionNotFound();
        if (current.status !== 'active') throw reauthRequired();
        return { connection: current, accessToken: null };
      } catch (e) {
        if (e instanceof AppError) throw e;
        if (attempt === 0) lane.release(true);
        const delay = backoffDelayMs(attempt, Math.random, 100, 2000);
        const code = (e as { code?: unknown }).code;
        if (performance.now() + delay >= saveUntil) {
          this.metrics.record('failure', secondsSince(started));
          this.logger.error(
            { connectionId: row.id, tenantId: row.tenantId, attempts: attempt + 1, error: e instanceof Error ? e.name : 'unknown', code },
            'LOST A ROTATED TOKEN PAIR: the upstream renewed this connection but the database refused the new pair until the lease ran out; the connection will need its user to reconnect',
          );
          throw new AppError('service_unavailable', 'The renewed connection could not be saved.');
        }
        this.logger.error(
          { connectionId: row.id, tenantId: row.tenantId, attempt: attempt + 1, error: e instanceof Error ? e.name : 'unknown', code },
          'saving a renewed token pair failed; retrying',
        );
        await sleep(delay);
      }
    }
  }
}
