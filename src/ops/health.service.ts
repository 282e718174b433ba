import { Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { AppError } from '../common/app-error.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { OpsRepository } from './ops.repository.js';

/** A readiness probe must answer even when the database hangs instead of refusing. */
const PING_TIMEOUT_MS = 2000;

@Injectable()
export class HealthService implements OnModuleInit, OnModuleDestroy {
  private unwatch: (() => void) | null = null;
  private shuttingDown = false;

  constructor(
    private readonly checks: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly repo: OpsRepository,
    private readonly tenantKeys: TenantKeys,
  ) {}

  /** While the database is unreachable, the outage record probes it with this instance's pool to notice its return. */
  onModuleInit(): void {
    this.unwatch = databaseOutage.watch(() => this.ping());
  }

  onModuleDestroy(): void {
    this.unwatch?.();
  }

  /** From the first moment of a drain (drain.ts) readiness answers 503, so load balancers stop sending new work here. */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  /**
   * Ready when this instance can serve: its database and its schema. Its key ring was checked against the
   * database before it started (vault/vault-key-check.service.ts); a stored secret that does not open is then
   * its owner's problem (that connection, receiver or tenant answers for it), never the instance's: one bad
   * row must not take every instance that meets it out of the load balancer.
   */
  async ready() {
    if (this.shuttingDown) throw new AppError('service_unavailable', 'The service is shutting down.', { shutdown: true });
    try {
      return await this.checks.check([
        async () => {
          const session = this.indicators.check('database');
          try {
            await this.ping();
            databaseOutage.recovered();
            return session.up();
          } catch (e) {
            if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
            return session.down({ message: isDatabaseUnavailable(e) ? 'unreachable' : e instanceof Error ? e.message : 'unreachable' });
          }
        },
        async () => {
          // Named and reported, never a reason to leave the load balancer: every instance shares the key store, and
          // while it is down tenants whose key is cached keep working here (KEY_CACHE_GRACE); the others get 503
          // key_store_unavailable. Only the store's kind, the KEK's id and the state: never a key or a PIN.
          const { store, kekId } = this.tenantKeys.store.describe();
          return this.indicators.check('keyStore').up({ store, kekId, state: await this.tenantKeys.probe() });
        },
        async () => {
          const session = this.indicators.check('migrations');
          try {
            const pending = await this.repo.pendingMigrations();
            return pending.length === 0 ? session.up() : session.down({ pending });
          } catch {
            return session.down({ message: 'migrations table unreadable' });
          }
        },
      ]);
    } catch (e) {
      const details = typeof e === 'object' && e && 'response' in e ? (e as { response: Record<string, unknown> }).response : undefined;
      throw new AppError('service_unavailable', 'The service is not ready.', details);
    }
  }

  private async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.repo.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(Object.assign(new Error('timeout exceeded when trying to connect'), { code: 'ETIMEDOUT', syscall: 'connect' })),
            PING_TIMEOUT_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
