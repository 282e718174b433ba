import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { TenantKeyResealer } from './tenant-key-resealer.js';
import { TenantKeyResealsRepository } from './tenant-key-reseals.repository.js';
import { TokenVault } from './token-vault.service.js';

/**
 * The serving instances' share of `keys rotate --tenant` (docs/keys.md): every VAULT_HEARTBEAT_MS an idle instance
 * takes the oldest open re-seal no other instance holds (a lease, SKIP LOCKED: one worker per tenant across every
 * instance) and runs it (TenantKeyResealer: small batches, a rest after each). A killed instance's re-seal is taken
 * over where its stored progress stands once its lease runs out (at once by the same INSTANCE_ID). Only while the
 * vault seals with the tenants' data keys (no instance of an older release is live).
 */
@Injectable()
export class TenantKeyResealLoop implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('TenantKeyReseal');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly stopping = new AbortController();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(TenantKeyResealer) private readonly resealer: TenantKeyResealer,
    @Inject(TenantKeyResealsRepository) private readonly reseals: TenantKeyResealsRepository,
    @Inject(TokenVault) private readonly vault: TokenVault,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      if (this.running || this.stopping.signal.aborted) return;
      this.running = this.tick()
        .catch((e: unknown) => this.report(e))
        .finally(() => (this.running = null));
    }, this.config.vaultHeartbeatMs);
    this.timer.unref();
  }

  /** Before the heartbeat's row goes (beforeApplicationShutdown): the re-seal stops at its next batch, its progress kept. */
  async onModuleDestroy(): Promise<void> {
    this.stopping.abort();
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** Takes one open re-seal, if any, and runs it. */
  async tick(): Promise<void> {
    if (!this.vault.sealsEnvelope) return;
    const owner = this.config.instanceId;
    const job = await this.reseals.claim(owner, this.resealer.leaseMs, this.config.keys.cacheTtlMs);
    if (!job) return;
    try {
      const run = await this.resealer.run(job, owner, { kind: 'service', id: null }, this.stopping.signal);
      if (run.outcome === 'finished' || (run.outcome === 'waiting' && run.resealed > 0))
        this.logger.log(
          { tenantId: run.tenantId, version: run.version, resealed: run.resealedInAll, retired: run.retired, kept: run.kept },
          run.outcome === 'finished'
            ? 'tenant data key rotated: values re-sealed, older versions destroyed'
            : 'tenant values re-sealed; older versions are destroyed after KEY_CACHE_TTL',
        );
    } catch (e) {
      await this.reseals.release(job.tenantId, owner).catch(() => undefined);
      throw e;
    }
  }

  private report(e: unknown): void {
    // Not migrated yet: readiness reports the pending migration; the loop finds its table once it is applied.
    if (codeOf(e) === '42P01') return;
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else this.logger.warn({ error: e instanceof Error ? e.message : 'unknown' }, 'tenant key re-seal failed; will retry');
  }
}

function codeOf(e: unknown): unknown {
  return (e as { code?: unknown }).code ?? (e as { driverError?: { code?: unknown } }).driverError?.code;
}
