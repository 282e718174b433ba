import { performance } from 'node:perf_hooks';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service.js';
import { Clock } from '../common/clock.js';
import { ConnectSessionsRepository } from '../connect/connect-sessions.repository.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { EventsRemoval } from '../events/events-removal.repository.js';
import { TenantApiKeysRepository } from '../auth/tenant-api-keys.repository.js';
import { TenantsRepository } from '../tenants/tenants.repository.js';
import { PACER_DEFAULTS, type PacerFigures, type PacerSettings, PurgePacer, timeProbe } from './purge-pacer.js';

const TENANTS_PER_RUN = 100;

export interface PurgeLimits {
  /** Batches at most, and rows in one batch at most. */
  maxBatches: number;
  batchSize: number;
  /** The run stops taking batches at this time (performance.now()); the next run goes on. */
  deadline: number;
  /** Overrides of the pacing (tests, the bench). */
  pacing?: Partial<PacerSettings>;
}

export interface PurgeRun {
  rows: number;
  tenants: string[];
  more: boolean;
  pacing: PacerFigures;
}

/**
 * Removes deleted tenants' rows in the background (TenantsService.delete only marks the tenant): batches of at
 * most `batchSize` rows, each its own short transaction, so other tenants' inserts and reads never wait behind one
 * big cascade, paced by what they cost the others (PurgePacer: the batch sized from the last one's time, a rest
 * after each, a longer one while the purge's own probe query is slow). Nothing is kept in memory between runs:
 * after a restart the next run goes on from what is left. The tenant's row goes last; its cascade then finds its
 * webhook receivers and at most what an instance of the previous release wrote meanwhile.
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
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  /**
   * Up to `maxBatches` paced batches over the deleted tenants, oldest deletion first, until `deadline`. Answers the
   * rows removed, the tenants finished, whether work is left, and what the pacing did.
   */
  async run(limits: PurgeLimits): Promise<PurgeRun> {
    const pacer = new PurgePacer({ ...PACER_DEFAULTS, maxRows: limits.batchSize, ...limits.pacing }, () =>
      timeProbe(() => this.db.query('SELECT 1')),
    );
    let batches = 0;
    let rows = 0;
    const finished: string[] = [];
    const deleted = await this.tenants.listDeleted(TENANTS_PER_RUN);
    for (const id of deleted) {
      await this.keys.revokeAll(id, this.clock.now());
      for (;;) {
        if (batches >= limits.maxBatches || performance.now() >= limits.deadline)
          return { rows, tenants: finished, more: true, pacing: pacer.figures };
        batches++;
        const size = await pacer.next();
        const started = performance.now();
        const n =
          (await this.connections.deleteSomeOfTenant(id, size)) ||
          (await this.sessions.deleteSomeOfTenant(id, size)) ||
          (await this.events.removeSomeOfTenant(id, null, size)) ||
          (await this.keys.deleteSomeOfTenant(id, size));
        pacer.done(n, performance.now() - started);
        rows += n;
        if (n === 0) break;
      }
      // The tenant's audit rows stay until AUDIT_RETENTION_DAYS, without its end users' identifiers.
      await this.audit.forgetUsersOf(id);
      await this.tenants.removeDeleted(id);
      finished.push(id);
    }
    return { rows, tenants: finished, more: deleted.length === TENANTS_PER_RUN, pacing: pacer.figures };
  }
}
