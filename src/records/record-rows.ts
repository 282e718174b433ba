import type { EntityManager } from 'typeorm';
import type { TokenVault } from '../vault/token-vault.service.js';
import type { ChangePosition } from './change-cursor.js';

/*
 * The pieces RecordsRepository builds its statements from: the feed's mark, the rows as read and their mapping (the
 * sealed objects opened), the records' locks and the references that bind each sealed object to its row.
 */

export type ChangeAction = 'added' | 'updated' | 'deleted';

export interface StoredRecord {
  id: string;
  userId: string;
  data: unknown;
  version: number | null;
  lastModified: Date | null;
  syncedAt: Date;
}

export interface StoredChange {
  id: string;
  userId: string;
  action: ChangeAction;
  version: number | null;
  lastModified: Date | null;
  data?: unknown;
  position: ChangePosition;
}

/**
 * The oldest transaction that may still add a row: the statement snapshot's oldest writer still in progress, or its
 * xmax when none is (as the events outbox reads, migration EventsPageFunction). A transaction of another database
 * (running now, per pg_stat_activity) writes nothing here and does not hold the mark back.
 */
export const MARK = `(SELECT LEAST(pg_snapshot_xmax(s), (
      SELECT min(x) FROM pg_snapshot_xip(s) x
       WHERE x::text::bigint % 4294967296 NOT IN (
               SELECT a.backend_xid::text::bigint FROM pg_stat_activity a
                WHERE a.backend_xid IS NOT NULL AND a.datname <> current_database())))
   FROM pg_current_snapshot() s)`;

export const CHANGE_COLUMNS = `seq, writer_xid::text AS writer_xid, user_id, workflow_id, action, version, last_modified, data_enc, changed_at, connection_id, tenant_id`;

export interface RecordJson {
  connection_id: string;
  tenant_id: string;
  user_id: string;
  workflow_id: string;
  data_enc: string | null;
  version: string | number | null;
  last_modified: string | null;
  synced_at: string;
}

export interface ChangeJson {
  seq: string | number;
  writer_xid: string;
  tenant_id: string;
  connection_id: string;
  user_id: string;
  workflow_id: string;
  action: ChangeAction;
  version: string | number | null;
  last_modified: string | null;
  data_enc: string | null;
  changed_at: string;
}

/**
 * Takes the transaction's advisory lock of each record, in key order, before anything is written (so before the
 * transaction has an id): see RecordsRepository's comment (commit order).
 */
export async function lockRecords(m: EntityManager, connectionId: string, ids: readonly string[]): Promise<void> {
  await m.query(
    `SELECT count(pg_advisory_xact_lock(k)) FROM (
       SELECT DISTINCT hashtextextended($1 || '/' || id, 42) AS k FROM unnest($2::text[]) id ORDER BY 1) keys`,
    [connectionId, ids],
  );
}

/** A record's sealed object is bound to its tenant, user and workflow id: it opens in that row only. */
export function recordRef(owner: { tenantId: string; userId: string }, workflowId: string) {
  return { table: 'records', id: `${owner.tenantId}/${owner.userId}/${workflowId}`, column: 'data_enc', tenantId: owner.tenantId };
}

export function feedRef(owner: { tenantId: string; userId: string }, workflowId: string) {
  return { table: 'record_changes', id: `${owner.tenantId}/${owner.userId}/${workflowId}`, column: 'data_enc', tenantId: owner.tenantId };
}

/** A `records` row as read (json_agg or a plain row), its object opened. */
export async function toRecord(vault: TokenVault, r: RecordJson): Promise<StoredRecord> {
  const owner = { tenantId: r.tenant_id, connectionId: r.connection_id, userId: r.user_id };
  return {
    id: r.workflow_id,
    userId: r.user_id,
    data: JSON.parse(await vault.open(r.data_enc ?? '', recordRef(owner, r.workflow_id))) as unknown,
    version: r.version === null ? null : Number(r.version),
    lastModified: r.last_modified === null ? null : new Date(r.last_modified),
    syncedAt: new Date(r.synced_at),
  };
}

/** A `record_changes` row as read, its object (if any) opened. */
export async function toChange(vault: TokenVault, r: ChangeJson): Promise<StoredChange> {
  const owner = { tenantId: r.tenant_id, connectionId: r.connection_id, userId: r.user_id };
  return {
    id: r.workflow_id,
    userId: r.user_id,
    action: r.action,
    version: r.version === null ? null : Number(r.version),
    lastModified: r.last_modified === null ? null : new Date(r.last_modified),
    ...(r.data_enc === null ? {} : { data: JSON.parse(await vault.open(r.data_enc, feedRef(owner, r.workflow_id))) as unknown }),
    position: { writerXid: r.writer_xid, seq: Number(r.seq), at: new Date(r.changed_at).getTime() },
  };
}
