import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import type { EntityManager } from 'typeorm';
import { CommitBatcher } from '../common/commit-batcher.js';
import { Clock } from '../common/clock.js';
import { EXACT_TIME, KeysetCursor, pageOf, UUID_TEXT } from '../common/page-cursor.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { AuditPosition, AuditRecord, AuditRow } from './audit-entry.js';
import { AuditLogRepository } from './audit-log.repository.js';

export const DEFAULT_AUDIT_PAGE = 100;
export const MAX_AUDIT_PAGE = 500;
/** Rows deleted per statement by the retention sweep: each batch is its own short transaction. */
export const AUDIT_SWEEP_BATCH = 2000;
// Often enough that instances restarted by frequent deploys still sweep; a sweep with nothing due is one index probe.
const AUDIT_SWEEP_MS = 10 * 60_000;
const DAY_MS = 86_400_000;

export interface AuditPage {
  items: AuditRow[];
  next: string | null;
}

/** The audit trail: recording, listing, erasure of a user's identifiers, and retention (AUDIT_RETENTION_DAYS). */
@Injectable()
export class AuditService {
  private readonly logger = new Logger('AuditService');
  /** Rows of frequent actions (an agent's tool calls) go together: one statement and one commit carry many under load. */
  private readonly grouped = new CommitBatcher<{ id: string; at: Date; record: AuditRecord }>((rows) => this.repo.insertMany(rows), 250);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    // Named (@Inject): the command line runs under tsx, which emits no decorator metadata, and writes key operations' rows.
    @Inject(AuditLogRepository) private readonly repo: AuditLogRepository,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  /** One row, at the service's clock; in `manager`'s transaction when given (the row commits with the change). */
  record(entry: AuditRecord, manager?: EntityManager): Promise<void> {
    return this.repo.insert(entry, this.clock.now(), manager);
  }

  /**
   * One row written after a change that has already committed: a failure to write it is logged, never
   * thrown, so that it cannot turn the caller's success into a failure.
   */
  async recordAfter(entry: AuditRecord): Promise<void> {
    try {
      await this.record(entry);
    } catch (e) {
      this.logger.error(
        { action: entry.action, tenantId: entry.tenantId, requestId: entry.requestId, err: e instanceof Error ? e.message : String(e) },
        'could not write an audit row',
      );
    }
  }

  /**
   * As recordAfter, for a row of a frequent action that changes nothing stored (an agent's tool call): written in a
   * group commit with the rows that arrive meanwhile; resolves once it is committed (or its failure logged).
   */
  async recordGrouped(entry: AuditRecord): Promise<void> {
    try {
      await this.grouped.save({ id: randomUUID(), at: this.clock.now(), record: entry });
    } catch (e) {
      this.logger.error(
        { action: entry.action, tenantId: entry.tenantId, requestId: entry.requestId, err: e instanceof Error ? e.message : String(e) },
        'could not write an audit row',
      );
    }
  }

  /** A page of one tenant's rows (or of every row: tenantId null), newest first; `next` continues after it. */
  async list(tenantId: string | null, q: { limit?: number; after?: string }): Promise<AuditPage> {
    const limit = q.limit ?? DEFAULT_AUDIT_PAGE;
    const after = q.after === undefined ? null : AUDIT_CURSOR.decode(listingOf(tenantId), q.after);
    const rows = await this.repo.listPage(tenantId, after, limit);
    const page = pageOf(rows, limit, (last) => AUDIT_CURSOR.encode(listingOf(tenantId), last.position));
    return { items: page.items.map(({ position: _position, ...row }) => row), next: page.next };
  }

  /**
   * The erasure of an end user (DELETE /v1/tenants/{tenantId}/users/{userId}): their earlier rows keep what
   * was done and lose who it concerned. Pass the erasure's transaction to make it part of it. The erasure's
   * own row is `record({ action: 'user.erased', ..., userId: null })`.
   */
  forgetUser(tenantId: string, userId: string, manager?: EntityManager): Promise<number> {
    return this.repo.forgetUser(tenantId, userId, manager);
  }

  /**
   * For a deleted tenant: every end user's identifiers leave its rows (as forgetUser does for one), in batches of
   * AUDIT_SWEEP_BATCH rows, each its own statement; the rows stay until AUDIT_RETENTION_DAYS. Answers how many.
   */
  async forgetUsersOf(tenantId: string): Promise<number> {
    let scrubbed = 0;
    for (;;) {
      const n = await this.repo.forgetUsersOf(tenantId, AUDIT_SWEEP_BATCH);
      scrubbed += n;
      if (n < AUDIT_SWEEP_BATCH) return scrubbed;
    }
  }

  /**
   * Removes rows older than AUDIT_RETENTION_DAYS in batches of AUDIT_SWEEP_BATCH, each its own transaction;
   * one instance at a time (the others find the lock taken and skip). Answers how many rows it removed.
   */
  async sweep(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - this.config.audit.retentionDays * DAY_MS);
    let removed = 0;
    for (;;) {
      const n = await this.repo.deleteOlderThan(before, AUDIT_SWEEP_BATCH);
      if (n === null) return removed;
      removed += n;
      if (n < AUDIT_SWEEP_BATCH) return removed;
    }
  }

  @Interval(AUDIT_SWEEP_MS)
  async sweepOnSchedule(): Promise<void> {
    try {
      const removed = await this.sweep();
      if (removed) this.logger.log({ removed }, 'removed audit rows past AUDIT_RETENTION_DAYS');
    } catch (e) {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not sweep the audit trail');
    }
  }
}

/**
 * The `next` cursor: the position of a page's last row, checked against the listing (a tenant's rows, or every
 * row) by `KeysetCursor`, so that a cut, altered or borrowed cursor is refused.
 */
const AUDIT_CURSOR = new KeysetCursor<AuditPosition>('a1', { at: EXACT_TIME, id: UUID_TEXT });

function listingOf(tenantId: string | null): string {
  return `audit|${tenantId ?? '*'}`;
}
