import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { cursorOf, textOfCursor } from '../common/page-cursor.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { TenantEntity } from '../tenants/tenant.entity.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { type ChangePosition, decodeChangeCursor, encodeChangeCursor, FEED_START, isAfter } from './change-cursor.js';
import { ChangeDto, DEFAULT_RECORDS_PAGE, RecordDto, SyncStateDto } from './dto/records.dto.js';
import type { StoredRecord } from './record-rows.js';
import { RecordsRepository } from './records.repository.js';
import { SyncEngine } from './sync-engine.service.js';
import { SyncStateRepository } from './sync-state.repository.js';

const DAY_MS = 86_400_000;

/** Reading a tenant's synced records, their change feed and its users' sync state (API.md 12). */
@Injectable()
export class RecordsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsRepository,
    private readonly records: RecordsRepository,
    private readonly syncs: SyncStateRepository,
    private readonly engine: SyncEngine,
  ) {}

  async list(
    tenantId: string,
    q: { userId?: string; limit?: number; after?: string },
  ): Promise<{ items: RecordDto[]; next: string | null; cursor: string }> {
    await this.tenantAndUser(tenantId, q.userId);
    const limit = q.limit ?? DEFAULT_RECORDS_PAGE;
    const after = q.after === undefined ? null : decodeRecordsAfter(q.after);
    const { records, mark } = await this.records.page(tenantId, q.userId, after, limit + 1);
    const items = records.slice(0, limit);
    const last = items.at(-1);
    return {
      items: items.map(toRecordDto),
      next: records.length > limit && last ? encodeRecordsAfter({ userId: last.userId, id: last.id }) : null,
      cursor: encodeChangeCursor(mark),
    };
  }

  async one(tenantId: string, userId: string | undefined, workflowId: string): Promise<RecordDto> {
    if (userId === undefined) throw new AppError('user_id_required', 'Name the user whose copy is read: ?userId=.');
    await this.tenantAndUser(tenantId, userId);
    const record = await this.records.findOne(tenantId, userId, workflowId);
    if (!record) throw new AppError('record_not_found', "This user's synced copy holds no such workflow.");
    return toRecordDto(record);
  }

  async changes(tenantId: string, q: { userId?: string; limit?: number; cursor?: string }): Promise<{ items: ChangeDto[]; next: string }> {
    await this.tenantAndUser(tenantId, q.userId);
    const now = this.clock.now().getTime();
    const from: ChangePosition = q.cursor === undefined ? { ...FEED_START, at: now } : decodeChangeCursor(q.cursor);
    if (from.at < now - this.config.sync.tombstoneDays * DAY_MS)
      throw new AppError(
        'cursor_expired',
        `The cursor is older than ${this.config.sync.tombstoneDays} days (SYNC_TOMBSTONE_DAYS): read the records again and follow their cursor.`,
      );
    const limit = q.limit ?? DEFAULT_RECORDS_PAGE;
    const { changes, mark, at } = await this.records.changesAfter(tenantId, q.userId, from, limit);
    const items: ChangeDto[] = changes.map((c) => ({
      id: c.id,
      userId: c.userId,
      action: c.action,
      version: c.version,
      ...(c.data === undefined ? {} : { data: c.data }),
      cursor: encodeChangeCursor(c.position),
    }));
    const last = changes.at(-1);
    if (changes.length === limit && last) return { items, next: encodeChangeCursor(last.position) };
    // Everything committed below the mark has been read: the next read starts there, given out now.
    const caughtUp = { writerXid: mark, seq: 0 };
    const position = isAfter(caughtUp, from) ? caughtUp : from;
    return { items, next: encodeChangeCursor({ ...position, at: at.getTime() }) };
  }

  async syncStates(
    tenantId: string,
    q: { userId?: string; limit?: number; after?: string },
  ): Promise<{ items: SyncStateDto[]; next: string | null }> {
    await this.tenantAndUser(tenantId, q.userId);
    const limit = q.limit ?? DEFAULT_RECORDS_PAGE;
    const after = q.after === undefined ? undefined : decodeSyncAfter(q.after);
    const rows = await this.syncs.page(tenantId, this.config.sync.workflows, q.userId, after, limit + 1);
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    return {
      items: items.map((s) => ({
        userId: s.userId,
        connectionId: s.connectionId,
        state: s.state,
        records: s.records,
        lastListedAt: s.lastListedAt?.toISOString() ?? null,
        lastChangeAt: s.lastChangeAt?.toISOString() ?? null,
        nextListAt: s.nextListAt.toISOString(),
        lagSeconds: s.lagSeconds,
        ...(s.lastError === null ? {} : { lastError: s.lastError }),
        failingSince: s.failingSince?.toISOString() ?? null,
      })),
      next: rows.length > limit && last ? cursorOf(`u|${last.userId}`) : null,
    };
  }

  /**
   * Whether the tenant syncs and when the user's copy was last listed whole (null: not yet), for readers of the
   * copy other than the routes (agents' read tools). `user_not_connected` without the user's connection.
   */
  async copyState(tenantId: string, userId: string): Promise<{ syncing: boolean; lastListedAt: Date | null }> {
    const tenant = await this.tenantAndUser(tenantId, userId);
    const syncing = tenant.syncWorkflows ?? this.config.sync.workflows;
    const [state] = await this.syncs.page(tenantId, this.config.sync.workflows, userId, undefined, 1);
    return { syncing, lastListedAt: state?.lastListedAt ?? null };
  }

  /** List now: one user, or every user of the tenant. */
  async syncNow(tenantId: string, userId: string | undefined): Promise<void> {
    const tenant = await this.tenantAndUser(tenantId, userId);
    if (!(tenant.syncWorkflows ?? this.config.sync.workflows))
      throw new AppError('conflict', 'Synced records are off for this tenant: PATCH the tenant with {"sync": {"workflows": true}}.');
    await this.engine.listNow(tenantId, userId);
  }

  /** The tenant (404 when unknown), and the user's connection when one is named (409 user_not_connected without). */
  private async tenantAndUser(tenantId: string, userId: string | undefined): Promise<TenantEntity> {
    const tenant = await this.tenants.get(tenantId);
    if (userId !== undefined && !(await this.connections.findUser(tenantId, userId)))
      throw new AppError('user_not_connected', 'This user has no connection: connect them with a connect session of kind "user".');
    return tenant;
  }
}

function toRecordDto(r: StoredRecord): RecordDto {
  return {
    id: r.id,
    userId: r.userId,
    data: r.data,
    version: r.version,
    lastModified: r.lastModified?.toISOString() ?? null,
    syncedAt: r.syncedAt.toISOString(),
  };
}

function encodeRecordsAfter(p: { userId: string; id: string }): string {
  return cursorOf(`r|${JSON.stringify([p.userId, p.id])}`);
}

function decodeRecordsAfter(cursor: string): { userId: string; id: string } {
  const text = textOfCursor(cursor, 2000);
  const refused = new AppError('validation_failed', 'after is not a cursor this service gave out for this listing.');
  if (!text?.startsWith('r|')) throw refused;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.slice(2));
  } catch {
    throw refused;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') throw refused;
  return { userId: parsed[0], id: parsed[1] };
}

function decodeSyncAfter(cursor: string): string {
  const text = textOfCursor(cursor, 400);
  if (!text?.startsWith('u|') || text.length < 3)
    throw new AppError('validation_failed', 'after is not a cursor this service gave out for this listing.');
  return text.slice(2);
}
