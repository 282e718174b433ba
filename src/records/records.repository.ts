import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { TokenVault } from '../vault/token-vault.service.js';
import { EventsRepository } from '../events/events.repository.js';
import { type ChangePosition, encodeChangeCursor } from './change-cursor.js';
import {
  type ChangeAction,
  type ChangeJson,
  CHANGE_COLUMNS,
  feedRef,
  lockRecords,
  MARK,
  type RecordJson,
  recordRef,
  type StoredChange,
  type StoredRecord,
  toChange,
  toRecord,
} from './record-rows.js';
import { newer, type UpstreamObject } from './upstream-object.js';

/** Whose copy: a user connection of a tenant. */
export interface CopyOwner {
  tenantId: string;
  connectionId: string;
  userId: string;
}

/** What one write did: the changes it committed (their feed positions), none for objects that did not change. */
export interface Applied {
  changes: Array<{ id: string; action: ChangeAction; version: number | null; cursor: string }>;
}

/**
 * The `records` table (one user's copy of the upstream's workflows, sealed) and `record_changes` (the change feed):
 * every change of a record commits with its feed row and its `record.changed` event, in one transaction.
 *
 * Commit order: each write first takes a transaction-level advisory lock per record it touches (sorted, so two
 * writers never deadlock), before any row is written and so before the transaction has an id. Two writers of the
 * same record therefore get their transaction ids in the order they write it, and the feed's (writer_xid, seq)
 * order is each record's own order of changes. The feed is read only below the oldest writer still open (MARK).
 */
@Injectable()
export class RecordsRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly vault: TokenVault,
    private readonly events: EventsRepository,
  ) {}

  /**
   * Writes what changed among `objects` (one user's, as the upstream answered them): a new object is `added`, a
   * newer or different one `updated`, an unchanged or older one nothing. `announce`: one `record.changed` event per
   * change, in the same transaction (false during a user's first listing, announced once by `sync.ready`).
   */
  async apply(owner: CopyOwner, objects: readonly UpstreamObject[], announce: boolean): Promise<Applied> {
    if (objects.length === 0) return { changes: [] };
    const unique = new Map(objects.map((o) => [o.id, o]));
    // The tenant's data key is loaded before the transaction: a key store call never runs under the records' locks.
    await this.vault.prepareSeal(owner.tenantId);
    return this.db.transaction(async (m) => {
      const ids = [...unique.keys()];
      await lockRecords(m, owner.connectionId, ids);
      const rows = (await m.query(
        `SELECT workflow_id, digest, version, last_modified, deleted_at FROM records WHERE connection_id = $1 AND workflow_id = ANY($2::text[])`,
        [owner.connectionId, ids],
      )) as Array<{
        workflow_id: string;
        digest: string | null;
        version: string | null;
        last_modified: Date | null;
        deleted_at: Date | null;
      }>;
      const current = new Map(rows.map((r) => [r.workflow_id, r]));
      const writes: Array<{ object: UpstreamObject; action: ChangeAction }> = [];
      for (const object of unique.values()) {
        const row = current.get(object.id);
        const live = row !== undefined && row.deleted_at === null;
        if (live && row.digest === object.digest) continue;
        if (live && !newer(object, { version: row.version === null ? null : Number(row.version), lastModified: row.last_modified }))
          continue;
        writes.push({ object, action: live ? 'updated' : 'added' });
      }
      const applied: Applied = { changes: [] };
      if (writes.length === 0) return applied;
      // One statement for the page's records and one for its feed rows, whatever their number.
      await m.query(
        `INSERT INTO records (connection_id, workflow_id, tenant_id, user_id, data_enc, digest, version, last_modified, synced_at, deleted_at)
         SELECT $1, u.id, $2, $3, u.data, u.digest, u.version, u.modified, now(), NULL
           FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::timestamptz[]) AS u(id, data, digest, version, modified)
         ON CONFLICT (connection_id, workflow_id) DO UPDATE SET data_enc = EXCLUDED.data_enc, digest = EXCLUDED.digest,
           version = EXCLUDED.version, last_modified = EXCLUDED.last_modified, synced_at = now(), deleted_at = NULL`,
        [
          owner.connectionId,
          owner.tenantId,
          owner.userId,
          writes.map((w) => w.object.id),
          await Promise.all(writes.map((w) => this.vault.seal(w.object.json, recordRef(owner, w.object.id)))),
          writes.map((w) => w.object.digest),
          writes.map((w) => w.object.version),
          writes.map((w) => w.object.lastModified),
        ],
      );
      const feed = (await m.query(
        `INSERT INTO record_changes (tenant_id, connection_id, user_id, workflow_id, action, version, last_modified, data_enc)
         SELECT $1, $2, $3, u.id, u.action, u.version, u.modified, u.data
           FROM unnest($4::text[], $5::text[], $6::bigint[], $7::timestamptz[], $8::text[]) WITH ORDINALITY AS u(id, action, version, modified, data, ord)
          ORDER BY u.ord
         RETURNING workflow_id, seq, writer_xid::text AS writer_xid, changed_at`,
        [
          owner.tenantId,
          owner.connectionId,
          owner.userId,
          writes.map((w) => w.object.id),
          writes.map((w) => w.action),
          writes.map((w) => w.object.version),
          writes.map((w) => w.object.lastModified),
          await Promise.all(writes.map((w) => this.vault.seal(w.object.json, feedRef(owner, w.object.id)))),
        ],
      )) as Array<{ workflow_id: string; seq: string; writer_xid: string; changed_at: Date }>;
      const positions = new Map(feed.map((r) => [r.workflow_id, r]));
      for (const { object, action } of writes) {
        const row = positions.get(object.id);
        if (!row) throw new Error('a feed row was not written');
        const cursor = encodeChangeCursor({ writerXid: row.writer_xid, seq: Number(row.seq), at: row.changed_at.getTime() });
        if (announce) await this.announce(m, owner, object.id, action, object.version, cursor);
        applied.changes.push({ id: object.id, action, version: object.version, cursor });
      }
      return applied;
    });
  }

  /**
   * Removes records from the copy (a tombstone and a `deleted` change each): those not written since `notSince`
   * (so that a targeted read during a listing is never undone by it). `ids` are the candidates.
   */
  async remove(owner: CopyOwner, ids: readonly string[], notSince: Date | null): Promise<Applied> {
    if (ids.length === 0) return { changes: [] };
    return this.db.transaction(async (m) => {
      await lockRecords(m, owner.connectionId, ids);
      const [removed] = (await m.query(
        `UPDATE records SET deleted_at = now(), data_enc = NULL, digest = NULL, synced_at = now()
          WHERE connection_id = $1 AND workflow_id = ANY($2::text[]) AND deleted_at IS NULL AND ($3::timestamptz IS NULL OR synced_at < $3)
          RETURNING workflow_id, version`,
        [owner.connectionId, ids, notSince],
      )) as [Array<{ workflow_id: string; version: string | null }>, number];
      const applied: Applied = { changes: [] };
      for (const r of removed.sort((a, b) => (a.workflow_id < b.workflow_id ? -1 : 1)))
        applied.changes.push(
          await this.change(m, owner, r.workflow_id, 'deleted', r.version === null ? null : Number(r.version), null, null, true),
        );
      return applied;
    });
  }

  private async change(
    m: EntityManager,
    owner: CopyOwner,
    id: string,
    action: ChangeAction,
    version: number | null,
    lastModified: Date | null,
    dataEnc: string | null,
    announce: boolean,
  ): Promise<Applied['changes'][number]> {
    const [row] = (await m.query(
      `INSERT INTO record_changes (tenant_id, connection_id, user_id, workflow_id, action, version, last_modified, data_enc)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq, writer_xid::text AS writer_xid, changed_at`,
      [owner.tenantId, owner.connectionId, owner.userId, id, action, version, lastModified, dataEnc],
    )) as Array<{ seq: string; writer_xid: string; changed_at: Date }>;
    const cursor = encodeChangeCursor({ writerXid: row.writer_xid, seq: Number(row.seq), at: row.changed_at.getTime() });
    if (announce) await this.announce(m, owner, id, action, version, cursor);
    return { id, action, version, cursor };
  }

  /** The change's `record.changed` event, in the change's transaction. */
  private async announce(
    m: EntityManager,
    owner: CopyOwner,
    id: string,
    action: ChangeAction,
    version: number | null,
    cursor: string,
  ): Promise<void> {
    await this.events.record(
      {
        tenantId: owner.tenantId,
        source: 'service',
        type: 'record.changed',
        userId: owner.userId,
        payload: { object: 'workflow', id, userId: owner.userId, action, version, cursor },
      },
      m,
    );
  }

  /** Ids of the live records of a connection after `after`, in id order (a page: the listing's removal pass reads them so). */
  async liveIds(connectionId: string, after: string, limit: number): Promise<string[]> {
    const rows = (await this.db.query(
      `SELECT workflow_id FROM records WHERE connection_id = $1 AND deleted_at IS NULL AND workflow_id > $2 ORDER BY workflow_id LIMIT $3`,
      [connectionId, after, limit],
    )) as Array<{ workflow_id: string }>;
    return rows.map((r) => r.workflow_id);
  }

  /** Whether the connection's copy holds the workflow (live). */
  async holds(connectionId: string, workflowId: string): Promise<boolean> {
    const rows = (await this.db.query(`SELECT 1 FROM records WHERE connection_id = $1 AND workflow_id = $2 AND deleted_at IS NULL`, [
      connectionId,
      workflowId,
    ])) as unknown[];
    return rows.length > 0;
  }

  /** The user connections of a tenant whose copy holds `workflowId` (an inbound event's hint). */
  async holders(tenantId: string, workflowId: string, limit: number): Promise<CopyOwner[]> {
    const rows = (await this.db.query(
      `SELECT connection_id, user_id FROM records WHERE tenant_id = $1 AND workflow_id = $2 AND deleted_at IS NULL LIMIT $3`,
      [tenantId, workflowId, limit],
    )) as Array<{ connection_id: string; user_id: string }>;
    return rows.map((r) => ({ tenantId, connectionId: r.connection_id, userId: r.user_id }));
  }

  async countLive(connectionId: string): Promise<number> {
    const [row] = (await this.db.query(`SELECT count(*)::int AS n FROM records WHERE connection_id = $1 AND deleted_at IS NULL`, [
      connectionId,
    ])) as Array<{ n: number }>;
    return row.n;
  }

  /**
   * A page of the live records of a tenant (one user's, or all) after `after` (user id, workflow id), and the feed
   * position of this read's snapshot: every change not reflected in the page is after it.
   */
  async page(
    tenantId: string,
    userId: string | undefined,
    after: { userId: string; id: string } | null,
    limit: number,
  ): Promise<{ records: StoredRecord[]; mark: ChangePosition }> {
    const [row] = (await this.db.query(
      `SELECT ${MARK}::text AS mark, now() AS at, COALESCE((SELECT json_agg(r) FROM (
          SELECT connection_id, tenant_id, user_id, workflow_id, data_enc, version, last_modified, synced_at FROM records
           WHERE tenant_id = $1 AND deleted_at IS NULL AND ($2::text IS NULL OR user_id = $2)
             AND ($3::text IS NULL OR (user_id, workflow_id) > ($3, $4::text))
           ORDER BY user_id, workflow_id LIMIT $5) r), '[]') AS rows`,
      [tenantId, userId ?? null, after?.userId ?? null, after?.id ?? '', limit],
    )) as Array<{ mark: string; at: Date; rows: RecordJson[] }>;
    return {
      records: await Promise.all(row.rows.map((r) => toRecord(this.vault, r))),
      mark: { writerXid: row.mark, seq: 0, at: row.at.getTime() },
    };
  }

  /** One live record of a user's copy, or null. */
  async findOne(tenantId: string, userId: string, workflowId: string): Promise<StoredRecord | null> {
    const rows = (await this.db.query(
      `SELECT connection_id, tenant_id, user_id, workflow_id, data_enc, version, last_modified, synced_at FROM records
        WHERE tenant_id = $1 AND user_id = $2 AND workflow_id = $3 AND deleted_at IS NULL`,
      [tenantId, userId, workflowId],
    )) as RecordJson[];
    return rows[0] ? await toRecord(this.vault, rows[0]) : null;
  }

  /**
   * The tenant's changes after `after` in feed order, only from transactions that can no longer add a row before
   * them (below MARK), and that mark: a page that ends short of `limit` has read everything committed below it.
   */
  async changesAfter(
    tenantId: string,
    userId: string | undefined,
    after: ChangePosition,
    limit: number,
  ): Promise<{ changes: StoredChange[]; mark: string; at: Date }> {
    const userFilter = userId === undefined ? '' : 'AND c.user_id = $5';
    const [row] = (await this.db.query(
      `WITH m AS (SELECT ${MARK} AS mark)
       SELECT (SELECT mark FROM m)::text AS mark, now() AS at, COALESCE((SELECT json_agg(r ORDER BY r.writer_xid8, r.seq) FROM (
          SELECT ${CHANGE_COLUMNS.replace('writer_xid::text AS writer_xid', 'writer_xid::text AS writer_xid, writer_xid AS writer_xid8')}
            FROM record_changes c
           WHERE c.tenant_id = $1 AND (c.writer_xid, c.seq) > ($2::xid8, $3::bigint) AND c.writer_xid < (SELECT mark FROM m) ${userFilter}
           ORDER BY c.writer_xid, c.seq LIMIT $4) r), '[]') AS rows`,
      userId === undefined ? [tenantId, after.writerXid, after.seq, limit] : [tenantId, after.writerXid, after.seq, limit, userId],
    )) as Array<{ mark: string; at: Date; rows: ChangeJson[] }>;
    return { changes: await Promise.all(row.rows.map((r) => toChange(this.vault, r))), mark: row.mark, at: row.at };
  }

  /** Removes tombstones and feed rows older than `before`, at most `limit` of each; answers how many. */
  async prune(before: Date, limit: number): Promise<number> {
    const [, tombstones] = (await this.db.query(
      `DELETE FROM records WHERE ctid IN (SELECT ctid FROM records WHERE deleted_at IS NOT NULL AND deleted_at < $1 LIMIT $2)`,
      [before, limit],
    )) as [unknown, number];
    const [, changes] = (await this.db.query(
      `DELETE FROM record_changes WHERE seq IN (SELECT seq FROM record_changes WHERE changed_at < $1 LIMIT $2)`,
      [before, limit],
    )) as [unknown, number];
    return tombstones + changes;
  }
}
