import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { EventsRepository } from '../events/events.repository.js';
import { traceSyncRun, type SyncRunFigures } from '../telemetry/operation-spans.js';
import { encodeChangeCursor } from './change-cursor.js';
import { toUnlisted, Unlisted } from './listing-answers.js';
import { type CopyOwner, RecordsRepository } from './records.repository.js';
import { SyncMetrics } from './sync-metrics.js';
import { SyncShare } from './sync-share.service.js';
import { type ClaimedSync, SyncStateRepository } from './sync-state.repository.js';
import { TargetedReads } from './targeted-reads.service.js';
import { UserListing } from './user-listing.service.js';

const TICK_MS = 1000;
const ENROL_EVERY_TICKS = 10;
const CLAIM_BATCH = 8;
const PRUNE_BATCH = 1000;
const FAILING_AFTER_MS = 3_600_000;

/**
 * The sync engine (API.md 12): lists each synced user's `GET /workflows` with that user's own token (through the
 * routing module, so renewal, renew-on-401 and the company's budget apply) in the `background` lane, within
 * SYNC_BUDGET_SHARE of the company's read budget, and reads `GET /workflows/{id}` for inbound events that name a
 * workflow. Users are taken with a lease (SyncStateRepository.claim): one instance lists a user at a time, and a
 * killed instance's users are listed by another once its leases run out. The engine runs the passes and stores each
 * listing's outcome; one user's listing is UserListing's, the targeted reads TargetedReads', the share SyncShare's.
 */
@Injectable()
export class SyncEngine implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('SyncEngine');
  private timer: NodeJS.Timeout | null = null;
  private ticks = 0;
  private running: Promise<void> | null = null;
  private stopping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly records: RecordsRepository,
    private readonly syncs: SyncStateRepository,
    private readonly events: EventsRepository,
    private readonly share: SyncShare,
    private readonly listing: UserListing,
    private readonly reads: TargetedReads,
    private readonly metrics: SyncMetrics,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      if (this.running || this.stopping) return;
      this.running = this.tick()
        .catch((e: unknown) => this.background(e, 'sync tick failed'))
        .finally(() => (this.running = null));
    }, TICK_MS);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    this.listing.drain();
    const hintsRead = this.reads.drain();
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await hintsRead;
    await this.syncs.release(this.config.instanceId).catch(() => undefined);
  }

  /** One pass: enrol new users now and then, take the due ones and list them. */
  async tick(): Promise<void> {
    if (this.ticks++ % ENROL_EVERY_TICKS === 0) {
      await this.syncs.enrol(this.config.sync.workflows);
      // Up to 10 batches of each a pass: a backlog is swept in a few passes, no pass holds the database long.
      const before = new Date(this.clock.now().getTime() - (this.config.sync.tombstoneDays + 1) * 86_400_000);
      for (let i = 0; i < 10 && (await this.records.prune(before, PRUNE_BATCH)) >= PRUNE_BATCH; i++);
    }
    if (this.ticks % ENROL_EVERY_TICKS === 1) this.metrics.lag.set(await this.syncs.lagSeconds(this.config.sync.workflows));
    // A tenant whose share this instance was just refused is not claimed until the share frees a call: its users
    // would only be leased to be put back.
    const claimed = await this.syncs.claim(
      this.config.instanceId,
      this.config.sync.workflows,
      this.listing.leaseMs,
      CLAIM_BATCH,
      this.share.spentTenants(),
    );
    await Promise.all(claimed.map((c) => this.list(c)));
  }

  /** List now (POST …/sync): enrols the tenant's users first, so a user connected a moment ago is listed too. */
  async listNow(tenantId: string, userId: string | undefined): Promise<void> {
    await this.syncs.enrol(this.config.sync.workflows, tenantId);
    await this.syncs.listNow(tenantId, userId);
  }

  /** An inbound event named a workflow: read it again for every synced user whose copy holds it (a hint only). */
  hint(tenantId: string, workflowId: string): void {
    this.reads.hint(tenantId, workflowId);
  }

  /** GET /workflows/{id} with the user's token (TargetedReads.readOne). */
  readOne(owner: CopyOwner, workflowId: string, run: SyncRunFigures): Promise<void> {
    return this.reads.readOne(owner, workflowId, run);
  }

  /** A background step's failure: the database's absence is counted once by the outage report, not logged per tick. */
  private background(e: unknown, message: string): void {
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else this.logger.warn({ error: e instanceof Error ? e.message : 'unknown' }, message);
  }

  /** One user's whole listing, a `sync.listing` span; its outcome is stored on the user's sync row. */
  list(c: ClaimedSync): Promise<void> {
    return traceSyncRun('listing', c, undefined, (run) => this.listRun(c, run));
  }

  /**
   * `run` gets the listing's figures: pages read, changes written, and its outcome: `listed`, `failed` (its own
   * failure), `deferred` (sync's share or the company's budget spent, or a drain: listed later), `lease_lost`.
   */
  private async listRun(c: ClaimedSync, run: SyncRunFigures): Promise<void> {
    const me = this.config.instanceId;
    try {
      const { changed, records } = await this.listing.listAll(c, run);
      run.outcome = 'listed';
      const nextInMs = await this.share.intervalOf(c.tenantId);
      await this.syncs.transaction(async (m) => {
        const held = await this.syncs.listed(c.connectionId, me, records, changed, nextInMs, m);
        if (held && c.state === 'initial') {
          const mark = (await this.records.page(c.tenantId, c.userId, null, 1)).mark;
          await this.events.record(
            {
              tenantId: c.tenantId,
              source: 'service',
              type: 'sync.ready',
              userId: c.userId,
              payload: { userId: c.userId, records, cursor: encodeChangeCursor(mark) },
            },
            m,
          );
        }
      });
    } catch (e) {
      const unlisted = e instanceof Unlisted ? e : toUnlisted(e);
      if (unlisted === null) {
        run.outcome = 'lease_lost';
        return; // the instance that holds it now answers for the user
      }
      run.outcome = unlisted.failed ? 'failed' : 'deferred';
      const now = this.clock.now().getTime();
      const since = c.failingSince?.getTime() ?? now;
      const failing = unlisted.failed && now - since >= FAILING_AFTER_MS;
      const announce = failing && !c.failingAnnounced;
      await this.syncs.unlisted(
        c.connectionId,
        me,
        unlisted.message,
        unlisted.failed,
        unlisted.failed ? Math.min(unlisted.retryInMs, this.config.sync.pollIntervalMs) : unlisted.retryInMs,
        {
          state: failing,
          announced: announce,
        },
      );
      if (announce)
        await this.events.record({
          tenantId: c.tenantId,
          source: 'service',
          type: 'sync.failing',
          userId: c.userId,
          payload: { userId: c.userId, reason: unlisted.message, since: new Date(since).toISOString() },
        });
    }
  }
}

/**
 * The workflow an inbound event names, or null: its `workflowId`, else its `workflow.id` (the spec shows no event
 * payload; these are the sandbox's, see docs/upstream.md). Only a hint: the workflow is then read with each user's token.
 */
export function workflowIdOfEvent(payload: unknown): string | null {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return null;
  const fields = payload as Record<string, unknown>;
  const nested = fields.workflow;
  const id =
    fields.workflowId ??
    (nested !== null && typeof nested === 'object' && !Array.isArray(nested) ? (nested as Record<string, unknown>).id : undefined);
  return typeof id === 'string' && id.length > 0 && id.length <= 500 ? id : null;
}
