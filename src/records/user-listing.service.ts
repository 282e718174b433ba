import { Inject, Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { RoutingService } from '../routing/routing.service.js';
import type { SyncRunFigures } from '../telemetry/operation-spans.js';
import { nextPagePath } from './link-header.js';
import { bodyOf, LeaseLost, listingOf, objectsOf, RETRY_MS, Unlisted } from './listing-answers.js';
import { RecordsRepository } from './records.repository.js';
import { SyncMetrics } from './sync-metrics.js';
import { SyncShare } from './sync-share.service.js';
import { type ClaimedSync, SyncStateRepository } from './sync-state.repository.js';

const MAX_PAGES = 10_000;
/** A paged listing cut part way is resumed from where it stood when it began less than this long ago; else it starts over. */
const RESUME_WITHIN_MS = 3_600_000;
const REMOVE_BATCH = 500;

/**
 * One user's listing of `GET /workflows` (API.md 12) with that user's own token, in the `background` lane: its pages,
 * the point a cut listing resumes from, each page's objects written as it arrives, and the removals that only a
 * complete listing makes. It fails by throwing Unlisted (or LeaseLost); the engine stores the outcome.
 */
@Injectable()
export class UserListing {
  /**
   * How long a user's listing is held by the instance running it without a sign of life (renewed at each page): the
   * poll interval, within 5 to 60 s. A killed instance's users are listed by another after it.
   */
  readonly leaseMs: number;
  private draining = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly environments: Environments,
    private readonly routing: RoutingService,
    private readonly records: RecordsRepository,
    private readonly syncs: SyncStateRepository,
    private readonly share: SyncShare,
    private readonly metrics: SyncMetrics,
  ) {
    this.leaseMs = Math.min(60_000, Math.max(5_000, config.sync.pollIntervalMs));
  }

  /** The instance drains: a listing running now stops at its next page. */
  drain(): void {
    this.draining = true;
  }

  /**
   * Every page of the user's GET /workflows, each page's objects written as it arrives; then, the listing being
   * complete, what it no longer holds is removed (not what a targeted read wrote meanwhile).
   */
  async listAll(c: ClaimedSync, run: SyncRunFigures): Promise<{ changed: boolean; records: number }> {
    const listing = listingOf(this.environments, c.environment);
    const env = this.environments.get(c.environment);
    const resume = c.resume !== null && this.clock.now().getTime() - c.resume.startedAt.getTime() < RESUME_WITHIN_MS ? c.resume : null;
    const startedAt = resume?.startedAt ?? (await this.syncs.databaseNow());
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
      if (this.draining) throw new Unlisted('the instance listing it shut down', false, 0);
      if (!(await this.syncs.extend(c.connectionId, this.config.instanceId, this.leaseMs))) throw new LeaseLost();
      const waitMs = await this.share.waitMs(c.tenantId);
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
        this.metrics.calls.inc({ kind: 'list', outcome: 'failed' });
        throw new Unlisted(`GET /workflows answered ${res.status} (page ${page + 1})`, true, RETRY_MS);
      }
      const text = await bodyOf(res);
      this.metrics.calls.inc({ kind: 'list', outcome: 'ok' });
      run.pages++;
      const objects = objectsOf(text, listing, page);
      const applied = await this.records.apply(c, objects, announce);
      run.changes += this.metrics.count(applied);
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
      run.changes += this.metrics.count(applied);
      changed ||= applied.changes.length > 0;
    }
    if (paged) await this.syncs.forgetListing(c.connectionId);
    return { changed, records: await this.records.countLive(c.connectionId) };
  }
}
