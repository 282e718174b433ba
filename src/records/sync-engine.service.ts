import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { databaseOutage, isDatabaseUnavailable } from '../common/database-outage.js';
import type { AppConfig, WorkflowListing } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { budgetsInForce, type Budget } from '../config/quota-budgets.js';
import { EventsRepository } from '../events/events.repository.js';
import { QuotaService } from '../quota/quota.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { MetricsService } from '../telemetry/metrics.service.js';
import { contextOf, currentTraceparent, traceSyncRun, type SyncRunFigures } from '../telemetry/operation-spans.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { readAnswer } from '../upstream/upstream-answers.js';
import type { ResourceResponse } from '../upstream/upstream.types.js';
import { nextPagePath, OffOrigin } from './link-header.js';
import { type CopyOwner, RecordsRepository } from './records.repository.js';
import { encodeChangeCursor } from './change-cursor.js';
import { type ClaimedSync, SyncStateRepository } from './sync-state.repository.js';
import { upstreamObject, type UpstreamObject } from './upstream-object.js';

const TICK_MS = 1000;
const ENROL_EVERY_TICKS = 10;
const CLAIM_BATCH = 8;
const MAX_PAGES = 10_000;
/** A paged listing cut part way is resumed from where it stood when it began less than this long ago; else it starts over. */
const RESUME_WITHIN_MS = 3_600_000;
const REMOVE_BATCH = 500;
const PRUNE_BATCH = 1000;
const RETRY_MS = 60_000;
const FAILING_AFTER_MS = 3_600_000;
const HINTS_QUEUED = 10_000;
const MAX_PAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_LISTING: WorkflowListing = { query: '', items: '', idField: 'id' };

/** A listing that did not complete: nothing is removed. `failed`: the listing's own failure (not a budget refusal). */
class Unlisted extends Error {
  constructor(
    message: string,
    readonly failed: boolean,
    readonly retryInMs: number,
  ) {
    super(message);
  }
}

/**
 * The sync engine (API.md 12): lists each synced user's `GET /workflows` with that user's own token (through the
 * routing module, so renewal, renew-on-401 and the company's budget apply) in the `background` lane, within
 * SYNC_BUDGET_SHARE of the company's read budget, and reads `GET /workflows/{id}` for inbound events that name a
 * workflow. Users are taken with a lease (SyncStateRepository.claim): one instance lists a user at a time, and a
 * killed instance's users are listed by another once its leases run out.
 */
@Injectable()
export class SyncEngine implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('SyncEngine');
  private timer: NodeJS.Timeout | null = null;
  private ticks = 0;
  /** Tenants whose sync share this instance was refused, and until when (ms since the epoch): not claimed meanwhile. */
  private readonly spentUntil = new Map<string, number>();
  private running: Promise<void> | null = null;
  private stopping = false;
  /** Workflows named by inbound events, with the trace of the delivery that named each (its read's parent span). */
  private readonly hints: Array<{ tenantId: string; workflowId: string; traceparent: string | null }> = [];
  private hinting: Promise<void> | null = null;
  private readonly calls: Counter<'kind' | 'outcome'>;
  private readonly changes: Counter<'action'>;
  private readonly lag: Gauge;
  /**
   * How long a user's listing is held by the instance running it without a sign of life (renewed at each page): the
   * poll interval, within 5 to 60 s. A killed instance's users are listed by another after it.
   */
  private readonly leaseMs: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly clock: Clock,
    private readonly environments: Environments,
    private readonly routing: RoutingService,
    private readonly tenants: TenantsService,
    private readonly records: RecordsRepository,
    private readonly syncs: SyncStateRepository,
    private readonly events: EventsRepository,
    private readonly quota: QuotaService,
    metrics: MetricsService,
  ) {
    this.calls = new Counter({
      name: 'cws_sync_upstream_calls_total',
      help: 'Upstream calls made by synced records, by kind (list, read) and outcome (ok, failed, refused).',
      labelNames: ['kind', 'outcome'],
      registers: [metrics.registry],
    });
    this.changes = new Counter({
      name: 'cws_sync_changes_total',
      help: 'Changes written to the synced records, by action.',
      labelNames: ['action'],
      registers: [metrics.registry],
    });
    this.leaseMs = Math.min(60_000, Math.max(5_000, config.sync.pollIntervalMs));
    this.lag = new Gauge({
      name: 'cws_sync_lag_seconds',
      help: "How late the oldest due listing of a synced user is (every instance's users), as this instance last read it.",
      registers: [metrics.registry],
    });
  }

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
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await this.hinting;
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
    if (this.ticks % ENROL_EVERY_TICKS === 1) this.lag.set(await this.syncs.lagSeconds(this.config.sync.workflows));
    // A tenant whose share this instance was just refused is not claimed until the share frees a call: its users
    // would only be leased to be put back.
    const now = this.clock.now().getTime();
    for (const [tenantId, until] of this.spentUntil) if (until <= now) this.spentUntil.delete(tenantId);
    const claimed = await this.syncs.claim(this.config.instanceId, this.config.sync.workflows, this.leaseMs, CLAIM_BATCH, [
      ...this.spentUntil.keys(),
    ]);
    await Promise.all(claimed.map((c) => this.list(c)));
  }

  /** List now (POST …/sync): enrols the tenant's users first, so a user connected a moment ago is listed too. */
  async listNow(tenantId: string, userId: string | undefined): Promise<void> {
    await this.syncs.enrol(this.config.sync.workflows, tenantId);
    await this.syncs.listNow(tenantId, userId);
  }

  /** An inbound event named a workflow: read it again for every synced user whose copy holds it (a hint only). */
  hint(tenantId: string, workflowId: string): void {
    if (this.stopping || this.hints.length >= HINTS_QUEUED) return;
    this.hints.push({ tenantId, workflowId, traceparent: currentTraceparent() });
    if (!this.hinting) this.hinting = this.drainHints().finally(() => (this.hinting = null));
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
    if ((await this.shareWaitMs(owner.tenantId)) > 0) return;
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
      this.calls.inc({ kind: 'read', outcome: 'ok' });
      run.changes = this.count(await this.records.remove(owner, [workflowId], null));
      await this.syncs.touched(owner.connectionId, await this.records.countLive(owner.connectionId));
      run.outcome = 'removed';
      return;
    }
    if (res.status < 200 || res.status > 299) {
      await res.body.dump();
      this.calls.inc({ kind: 'read', outcome: 'failed' });
      return;
    }
    this.calls.inc({ kind: 'read', outcome: 'ok' });
    const tenant = await this.tenants.get(owner.tenantId);
    const object = upstreamObject(JSON.parse(await this.bodyOf(res)) as unknown, this.listingOf(tenant.environment).idField);
    // Never an object under another id than the one asked for.
    if (object === null || object.id !== workflowId) return;
    const applied = await this.records.apply(owner, [object], true);
    run.changes = this.count(applied);
    run.outcome = 'read';
    if (applied.changes.length > 0) await this.syncs.touched(owner.connectionId, await this.records.countLive(owner.connectionId));
  }

  /** A background step's failure: the database's absence is counted once by the outage report, not logged per tick. */
  private background(e: unknown, message: string): void {
    if (isDatabaseUnavailable(e)) databaseOutage.report(e, 'background');
    else this.logger.warn({ error: e instanceof Error ? e.message : 'unknown' }, message);
  }

  /** An answer's body, read to at most MAX_PAGE_BYTES whether or not it names its length. */
  private async bodyOf(res: ResourceResponse): Promise<string> {
    try {
      return (await readAnswer(res, MAX_PAGE_BYTES)).text;
    } catch (e) {
      if (e instanceof AppError && e.code === 'upstream_error')
        throw new Unlisted(`an answer of GET /workflows is larger than ${MAX_PAGE_BYTES} bytes`, true, RETRY_MS);
      throw e;
    }
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
      const { changed, records } = await this.listAll(c, run);
      run.outcome = 'listed';
      const nextInMs = await this.intervalOf(c.tenantId);
      await this.db.transaction(async (m) => {
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

  /**
   * Every page of the user's GET /workflows, each page's objects written as it arrives; then, the listing being
   * complete, what it no longer holds is removed (not what a targeted read wrote meanwhile).
   */
  private async listAll(c: ClaimedSync, run: SyncRunFigures): Promise<{ changed: boolean; records: number }> {
    const listing = this.listingOf(c.environment);
    const env = this.environments.get(c.environment);
    const resume = c.resume !== null && this.clock.now().getTime() - c.resume.startedAt.getTime() < RESUME_WITHIN_MS ? c.resume : null;
    const [{ now }] = (await this.db.query(`SELECT now() AS now`)) as Array<{ now: Date }>;
    const startedAt = resume?.startedAt ?? now;
    // A listing that is not resumed starts afresh: what an earlier cut one saw no longer counts.
    if (resume === null && c.resume !== null) await this.syncs.forgetListing(c.connectionId);
    const announce = c.state !== 'initial';
    // A one-page listing keeps what it saw in memory (and writes nothing for it); a paged one in record_listing_ids.
    const seen = new Set<string>();
    let paged = resume !== null;
    let changed = false;
    let path: string | null = resume !== null ? resume.path || null : `/workflows${listing.query ? `?${listing.query}` : ''}`;
    for (let page = 0; path !== null; page++) {
      if (page >= MAX_PAGES) throw new Unlisted(`GET /workflows has more than ${MAX_PAGES} pages`, true, RETRY_MS);
      // A drain hands the user back at once (listed by another instance, from where this one stood).
      if (this.stopping) throw new Unlisted('the instance listing it shut down', false, 0);
      if (!(await this.syncs.extend(c.connectionId, this.config.instanceId, this.leaseMs))) throw new LeaseLost();
      const waitMs = await this.shareWaitMs(c.tenantId);
      if (waitMs > 0) throw new Unlisted("sync's share of the company's read budget is spent for now", false, waitMs + 100);
      const res = await this.routing.call(c.tenantId, 'user', c.userId, {
        method: 'GET',
        path,
        headers: { accept: 'application/json' },
        lane: 'background',
        retry: true,
      });
      if (res.status < 200 || res.status > 299) {
        await res.body.dump();
        this.calls.inc({ kind: 'list', outcome: 'failed' });
        throw new Unlisted(`GET /workflows answered ${res.status} (page ${page + 1})`, true, RETRY_MS);
      }
      const text = await this.bodyOf(res);
      this.calls.inc({ kind: 'list', outcome: 'ok' });
      run.pages++;
      const objects = objectsOf(text, listing, page);
      const applied = await this.records.apply(c, objects, announce);
      run.changes += this.count(applied);
      changed ||= applied.changes.length > 0;
      const next = nextPagePath(res.headers.link, path, env.apiUrl);
      if (next !== null || paged) {
        if (!paged) {
          // The listing turns out paged: what the first page saw goes where a resumed listing finds it.
          await this.syncs.forgetListing(c.connectionId);
          paged = true;
        }
        const ids = [...seen, ...objects.map((o) => o.id)];
        seen.clear();
        // '' once the last page is in: a listing resumed then only removes what it did not see.
        if (!(await this.syncs.progress(c.connectionId, this.config.instanceId, ids, next ?? '', startedAt))) throw new LeaseLost();
      } else for (const o of objects) seen.add(o.id);
      path = next;
    }
    const missing: string[] = [];
    if (paged) {
      for (
        let after = '', ids = await this.syncs.unseen(c.connectionId, startedAt, after, 1000);
        ids.length > 0;
        ids = await this.syncs.unseen(c.connectionId, startedAt, after, 1000)
      ) {
        missing.push(...ids);
        after = ids[ids.length - 1];
      }
    } else {
      for (
        let after = '', ids = await this.records.liveIds(c.connectionId, after, 1000);
        ids.length > 0;
        ids = await this.records.liveIds(c.connectionId, after, 1000)
      ) {
        for (const id of ids) if (!seen.has(id)) missing.push(id);
        after = ids[ids.length - 1];
      }
    }
    for (let i = 0; i < missing.length; i += REMOVE_BATCH) {
      const applied = await this.records.remove(c, missing.slice(i, i + REMOVE_BATCH), startedAt);
      run.changes += this.count(applied);
      changed ||= applied.changes.length > 0;
    }
    if (paged) await this.syncs.forgetListing(c.connectionId);
    return { changed, records: await this.records.countLive(c.connectionId) };
  }

  /** The interval before the user's next listing: SYNC_POLL_INTERVAL, stretched so the tenant's users fit the share. */
  private async intervalOf(tenantId: string): Promise<number> {
    const budget = await this.readBudget(tenantId);
    const interval = this.config.sync.pollIntervalMs;
    if (budget === null) return interval;
    const perWindow = Math.max(1, Math.floor(budget.calls * this.config.sync.budgetShare));
    const users = await this.syncs.countOfTenant(tenantId);
    return Math.max(interval, Math.ceil(users / perWindow) * budget.windowMs);
  }

  /**
   * One call of sync's share of the tenant's read budget, held in any interval of its window over every instance
   * (QuotaService.takePart: the budgets' sliding log): 0 when it may go (always, without a read budget), else the ms
   * until the share frees a call.
   */
  private async shareWaitMs(tenantId: string): Promise<number> {
    const budget = await this.readBudget(tenantId);
    if (budget === null) return 0;
    const waitMs = await this.quota.takePart(tenantId, 'read', 'sync', budget, this.config.sync.budgetShare);
    if (waitMs > 0) {
      this.calls.inc({ kind: 'list', outcome: 'refused' });
      this.spentUntil.set(tenantId, this.clock.now().getTime() + waitMs);
    }
    return waitMs;
  }

  private async readBudget(tenantId: string): Promise<Budget | null> {
    const tenant = await this.tenants.get(tenantId);
    const budgets = budgetsInForce(this.environments.find(tenant.environment)?.quotas ?? {}, tenant.quotas);
    return budgets.read ?? null;
  }

  private listingOf(environment: string): WorkflowListing {
    return this.environments.find(environment)?.listing ?? DEFAULT_LISTING;
  }

  /** Counts the changes written (cws_sync_changes_total); answers how many. */
  private count(applied: { changes: Array<{ action: string }> }): number {
    for (const c of applied.changes) this.changes.inc({ action: c.action });
    return applied.changes.length;
  }
}

class LeaseLost extends Error {}

/** A failure of the listing as the user's sync row states it; null: the lease was lost (nothing to store). */
function toUnlisted(e: unknown): Unlisted | null {
  if (e instanceof LeaseLost) return null;
  if (e instanceof OffOrigin) return new Unlisted(e.message, true, RETRY_MS);
  if (e instanceof AppError) {
    if (e.code === 'quota_exhausted')
      return new Unlisted("the company's upstream budget is spent (quota_exhausted)", false, (e.retryAfterSeconds ?? 30) * 1000);
    return new Unlisted(`${e.code}: ${e.message}`, true, RETRY_MS);
  }
  return new Unlisted(
    e instanceof SyntaxError ? 'GET /workflows answered something that is not JSON' : 'GET /workflows failed',
    true,
    RETRY_MS,
  );
}

/** The objects of one page; a page whose shape is not the configured one fails the listing (nothing is removed). */
function objectsOf(text: string, listing: WorkflowListing, page: number): UpstreamObject[] {
  const body = JSON.parse(text) as unknown;
  const list = listing.items
    ? (body as Record<string, unknown> | null)?.[listing.items]
    : Array.isArray(body)
      ? body
      : (body as Record<string, unknown> | null)?.workflows;
  if (!Array.isArray(list))
    throw new Unlisted(`page ${page + 1} of GET /workflows holds no list where CWS_<ENV>_WORKFLOWS_ITEMS says`, true, RETRY_MS);
  const objects: UpstreamObject[] = [];
  for (const item of list) {
    const object = upstreamObject(item, listing.idField);
    if (object === null)
      throw new Unlisted(`an item of GET /workflows has no "${listing.idField}" (CWS_<ENV>_WORKFLOW_ID_FIELD)`, true, RETRY_MS);
    objects.push(object);
  }
  return objects;
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
