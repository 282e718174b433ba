import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { ChangeFeed } from '../changes/change-feed.service.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';

/** While the change feed is not live, how often every key this instance holds is checked against tenant_keys. */
export const REVOCATION_POLL_MS = 1000;

/**
 * A deleted tenant's data keys leave the memory of every instance within about a second: the deletion (and the
 * destruction of its keys: migration TenantKeyDestroyNotify) is announced on the change feed as a change of the
 * tenant, the same notification that drops its cached routes and access tokens (routing/route-cache.ts) and its API
 * keys (auth/api-key-cache.ts). On hearing it, each instance drops the tenant's keys whose rows are destroyed. While
 * the feed is not live (its client reconnecting), a poll of tenant_keys every REVOCATION_POLL_MS does the same for
 * every key held, and the feed's reset runs one at once: a change nobody heard is found by the poll.
 */
@Injectable()
export class TenantKeysRevocation implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('TenantKeys');
  private timer: NodeJS.Timeout | null = null;
  private polling = false;

  constructor(
    @Inject(ChangeFeed) private readonly feed: ChangeFeed,
    @Inject(TenantKeys) private readonly keys: TenantKeys,
  ) {}

  onModuleInit(): void {
    this.feed.subscribe((change) => {
      if (change.table === 'tenants' && this.keys.holds(change.tenantId)) void this.drop(change.tenantId);
    });
    this.feed.onReset(() => void this.drop());
    this.timer = setInterval(() => {
      if (!this.feed.live) void this.drop();
    }, REVOCATION_POLL_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async drop(tenantId?: string): Promise<void> {
    // One sweep of every key at a time (a slow database must not pile them up); a tenant's own check always runs.
    if (tenantId === undefined) {
      if (this.polling) return;
      this.polling = true;
    }
    try {
      const dropped = await this.keys.dropDestroyed(tenantId);
      if (dropped > 0) this.logger.log({ tenants: dropped }, "dropped the data keys of deleted tenants from this instance's memory");
    } catch (e) {
      // The database is unreachable: nothing of the tenant opens meanwhile either; the next poll or change tries again.
      this.logger.debug({ err: e instanceof Error ? e.message : String(e) }, 'could not check held tenant keys');
    } finally {
      if (tenantId === undefined) this.polling = false;
    }
  }
}
