import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { RenewalLeaseRepository, type RenewalRow } from '../connections/store/renewal-lease.repository.js';
import { UpstreamClient } from '../upstream/upstream-client.service.js';
import { TokenEndpointError, upstreamFailure } from '../upstream/upstream.errors.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { backoffDelayMs, classifyFailure, describeFailure, needsRenewal, retryAt } from './renewal-timing.js';
import { GrantRejected, type Mode, secondsSince, sleep } from './renewal-types.js';

const INLINE_ATTEMPTS = 3;

/**
 * The token call of a renewal that holds the lease. A transient failure is retried while the caller waits
 * only when its token is already unusable (and the lease leaves room for it); otherwise the failure is
 * stored with its backoff (the lease goes back) and answered as the contract's error.
 */
@Injectable()
export class TokenCall {
  private readonly logger = new Logger(TokenCall.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly leases: RenewalLeaseRepository,
    private readonly upstream: UpstreamClient,
    private readonly metrics: RefreshMetrics,
    private readonly clock: Clock,
  ) {}

  /** The new pair; throws GrantRejected for invalid_grant (nothing stored), an AppError otherwise (failure stored). */
  async call(row: RenewalRow, env: CwsEnvironment, refreshToken: string, mode: Mode, takenAt: number, started: number): Promise<TokenSet> {
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
        await this.leases.recordFailure(
          row.id,
          me,
          row.version,
          retryAt(this.clock.now(), row.refreshFailures, row.accessTokenExpiresAt, retryAfter),
        );
        this.metrics.record('failure', secondsSince(started));
        this.logger.warn(
          { connectionId: row.id, tenantId: row.tenantId, failure: describeFailure(e), failures, kind },
          'renewal failed; will retry with backoff',
        );
        throw (
          upstreamFailure(e, 'The upstream token endpoint') ??
          new AppError('upstream_error', `The upstream token endpoint refused the renewal (${describeFailure(e)}).`)
        );
      }
    }
  }
}
