import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { RoutingService } from '../routing/routing.service.js';
import { contextOf, currentTraceparent, traceSyncRun, type SyncRunFigures } from '../telemetry/operation-spans.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { bodyOf, listingOf } from './listing-answers.js';
import { type CopyOwner, RecordsRepository } from './records.repository.js';
import { SyncMetrics } from './sync-metrics.js';
import { SyncShare } from './sync-share.service.js';
import { SyncStateRepository } from './sync-state.repository.js';
import { upstreamObject } from './upstream-object.js';

const HINTS_QUEUED = 10_000;

/**
 * The targeted reads (API.md 12): `GET /workflows/{id}` for a workflow an inbound event named, with the token of
 * each synced user whose copy holds it, in the `background` lane within sync's share of the company's read budget.
 */
@Injectable()
export class TargetedReads {
  /** The engine's context: sync's warnings read as one component's, whichever part raised them. */
  private readonly logger = new Logger('SyncEngine');
  private stopping = false;
  /** Workflows named by inbound events, with the trace of the delivery that named each (its read's parent span). */
  private readonly hints: Array<{ tenantId: string; workflowId: string; traceparent: string | null }> = [];
  private hinting: Promise<void> | null = null;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly environments: Environments,
    private readonly routing: RoutingService,
    private readonly tenants: TenantsService,
    private readonly records: RecordsRepository,
    private readonly syncs: SyncStateRepository,
    private readonly share: SyncShare,
    private readonly metrics: SyncMetrics,
  ) {}

  /** An inbound event named a workflow: read it again for every synced user whose copy holds it (a hint only). */
  hint(tenantId: string, workflowId: string): void {
    if (this.stopping || this.hints.length >= HINTS_QUEUED) return;
    this.hints.push({ tenantId, workflowId, traceparent: currentTraceparent() });
    if (!this.hinting) this.hinting = this.drainHints().finally(() => (this.hinting = null));
  }

  /** The instance drains: no hint is taken any more; the reads of those queued are done. */
  async drain(): Promise<void> {
    this.stopping = true;
    await this.hinting;
  }

  private async drainHints(): Promise<void> {
    for (let next = this.hints.shift(); next; next = this.hints.shift()) {
      try {
        const tenant = await this.tenants.get(next.tenantId);
        if (!(tenant.syncWorkflows ?? this.config.sync.workflows)) continue;
        const { workflowId, traceparent } = next;
        for (const owner of await this.records.holders(next.tenantId, workflowId, 1000))
          await traceSyncRun('read', owner, contextOf(traceparent), (run) => this.readOne(owner, workflowId, run));
      } catch (e) {
        this.logger.warn({ tenantId: next.tenantId, error: e instanceof Error ? e.message : 'unknown' }, 'a targeted read failed');
      }
    }
  }

  /**
   * GET /workflows/{id} with the user's token: the object written if it changed; a 404 removes it from the copy.
   * `run` gets its figures: the outcome (`read`, `removed`, `failed`, `deferred`: outside sync's share) and changes.
   */
  async readOne(owner: CopyOwner, workflowId: string, run: SyncRunFigures): Promise<void> {
    run.outcome = 'deferred';
    if ((await this.share.waitMs(owner.tenantId)) > 0) return;
    run.outcome = 'failed';
    run.pages = 1;
    const res = await this.routing.call(owner.tenantId, 'user', owner.userId, {
      method: 'GET',
      path: `/workflows/${encodeURIComponent(workflowId)}`,
      headers: { accept: 'application/json' },
      lane: 'background',
      retry: true,
    });
    if (res.status === 404) {
      await res.body.dump();
      this.metrics.calls.inc({ kind: 'read', outcome: 'ok' });
      run.changes = this.metrics.count(await this.records.remove(owner, [workflowId], null));
      await this.syncs.touched(owner.connectionId, await this.records.countLive(owner.connectionId));
      run.outcome = 'removed';
      return;
    }
    if (res.status < 200 || res.status > 299) {
      await res.body.dump();
      this.metrics.calls.inc({ kind: 'read', outcome: 'failed' });
      return;
    }
    this.metrics.calls.inc({ kind: 'read', outcome: 'ok' });
    const tenant = await this.tenants.get(owner.tenantId);
    const object = upstreamObject(JSON.parse(await bodyOf(res)) as unknown, listingOf(this.environments, tenant.environment).idField);
    // Never an object under another id than the one asked for.
    if (object === null || object.id !== workflowId) return;
    const applied = await this.records.apply(owner, [object], true);
    run.changes = this.metrics.count(applied);
    run.outcome = 'read';
    if (applied.changes.length > 0) await this.syncs.touched(owner.connectionId, await this.records.countLive(owner.connectionId));
  }
}
