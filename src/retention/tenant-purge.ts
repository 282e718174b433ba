import { Injectable } from '@nestjs/common';
import { AuditService } from '../audit/audit.service.js';
import { Clock } from '../common/clock.js';
import { ConnectSessionsRepository } from '../connect/connect-sessions.repository.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { EventsRemoval } from '../events/events-removal.repository.js';
import { TenantApiKeysRepository } from '../auth/tenant-api-keys.repository.js';
import { TenantsRepository } from '../tenants/tenants.repository.js';

const TENANTS_PER_RUN = 100;

/**
 * Removes deleted tenants' rows in the background (TenantsService.delete only marks the tenant): batches of a
 * few thousand rows, each its own short transaction, so other tenants' inserts and reads never wait behind one
 * big cascade. Nothing is kept in memory between batches: after a restart the next run goes on from what is
 * left. The tenant's row goes last; its cascade then finds its webhook receivers and at most what an
 * instance of the previous release wrote meanwhile.
 */
@Injectable()
export class TenantPurge {
  constructor(
    private readonly tenants: TenantsRepository,
    private readonly keys: TenantApiKeysRepository,
    private readonly connections: ConnectionsRepository,
    private readonly sessions: ConnectSessionsRepository,
    private readonly events: EventsRemoval,
    private readonly clock: Clock,
    private readonly audit: AuditService,
  ) {}

  /**
   * Up to `maxBatches` batches of `batchSize` rows over the deleted tenants, oldest deletion first. Answers the rows
   * removed, the tenants finished, and whether work is left.
   */
  async run(maxBatches: number, batchSize: number): Promise<{ rows: number; tenants: string[]; more: boolean }> {
    let batches = 0;
    let rows = 0;
    const finished: string[] = [];
    const deleted = await this.tenants.listDeleted(TENANTS_PER_RUN);
    for (const id of deleted) {
      await this.keys.revokeAll(id, this.clock.now());
      for (;;) {
        if (batches >= maxBatches) return { rows, tenants: finished, more: true };
        batches++;
        const n =
          (await this.connections.deleteSomeOfTenant(id, batchSize)) ||
          (await this.sessions.deleteSomeOfTenant(id, batchSize)) ||
          (await this.events.removeSomeOfTenant(id, null, batchSize)) ||
          (await this.keys.deleteSomeOfTenant(id, batchSize));
        rows += n;
        if (n === 0) break;
      }
      // The tenant's audit rows stay until AUDIT_RETENTION_DAYS, without its end users' identifiers.
      await this.audit.forgetUsersOf(id);
      await this.tenants.removeDeleted(id);
      finished.push(id);
    }
    return { rows, tenants: finished, more: deleted.length === TENANTS_PER_RUN };
  }
}
