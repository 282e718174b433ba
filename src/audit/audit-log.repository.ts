import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import { exactTime } from '../database/exact-time.js';
import { preparedQuery } from '../database/pg-pool.js';
import type { ActorKind, AuditAction, AuditDetails, AuditOutcome, AuditPosition, AuditRecord, AuditRow } from './audit-entry.js';

/** Advisory lock of the retention sweep: one instance sweeps at a time, the others skip their turn. */
const SWEEP_LOCK = 7_310_442_101;

type RawRow = {
  id: string;
  at_text: string;
  actor_kind: ActorKind;
  actor_id: string | null;
  action: AuditAction;
  tenant_id: string | null;
  target: string | null;
  user_id: string | null;
  request_id: string | null;
  outcome: AuditOutcome;
  count: number;
  status: number | null;
  trace_id: string | null;
  details: AuditDetails | null;
};

/** A page starts before this position: after every row (`at` is never infinity). */
const AFTER_ALL: AuditPosition = { at: 'infinity', id: 'ffffffff-ffff-ffff-ffff-ffffffffffff' };

/** A page, newest first, before ($1, $2), at most $3 rows; `tenant` narrows it to one tenant's rows ($4). */
const PAGE_SQL = (tenant: string) =>
  `SELECT id, at::text AS at_text, actor_kind, actor_id,
          action, tenant_id, target, user_id, request_id, outcome, count, status, trace_id, details
     FROM audit_log WHERE ${tenant} (at, id) < ($1::timestamptz, $2::uuid)
    ORDER BY at DESC, id DESC
    LIMIT $3`;

/** A group of rows (columns as arrays), never coalesced. */
const INSERT_GROUP_SQL = `INSERT INTO audit_log (id, at, actor_kind, actor_id, action, tenant_id, target, user_id, request_id, outcome, status, trace_id)
  SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                       $9::text[], $10::text[], $11::int[], $12::text[])`;

/** Every read and write of the audit_log table. */
@Injectable()
export class AuditLogRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * One row; in `manager`'s transaction when given, so the row commits with the change it records. A failure
   * lands on its minute's row for the same action, actor and tenant (count + 1), so that a flood of failed
   * attempts (sign-ins above all) adds at most one row a minute.
   */
  async insert(r: AuditRecord, at: Date, manager?: EntityManager): Promise<void> {
    const bucket = r.outcome === 'failure' && r.action !== 'agent.tool_call' ? new Date(Math.floor(at.getTime() / 60_000) * 60_000) : null;
    await (manager ?? this.db).query(
      `INSERT INTO audit_log (id, at, actor_kind, actor_id, action, tenant_id, target, user_id, request_id, outcome, bucket, status, trace_id, details)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb)
       ON CONFLICT (bucket, action, actor_kind, COALESCE(actor_id, ''), COALESCE(tenant_id, '')) WHERE bucket IS NOT NULL
       DO UPDATE SET count = audit_log.count + 1`,
      [
        randomUUID(),
        at,
        r.actor.kind,
        r.actor.id,
        r.action,
        r.tenantId,
        r.target ?? null,
        r.userId ?? null,
        r.requestId,
        r.outcome,
        bucket,
        r.status ?? null,
        r.traceId ?? null,
        r.details ? JSON.stringify(r.details) : null,
      ],
    );
  }

  /**
   * Many rows in one statement (a group commit of agents' tool calls, AuditService.recordGrouped): never coalesced.
   * Answers the ids written.
   */
  async insertMany(rows: Array<{ id: string; at: Date; record: AuditRecord }>): Promise<Set<string>> {
    const col = <T>(f: (r: AuditRecord) => T) => rows.map((r) => f(r.record));
    // Named: each pooled connection plans the group's statement once (its plan does not depend on the arrays).
    await preparedQuery(this.db, {
      name: 'cws_audit_insert_group',
      text: INSERT_GROUP_SQL,
      values: [
        rows.map((r) => r.id),
        rows.map((r) => r.at),
        col((r) => r.actor.kind),
        col((r) => r.actor.id),
        col((r) => r.action),
        col((r) => r.tenantId),
        col((r) => r.target ?? null),
        col((r) => r.userId ?? null),
        col((r) => r.requestId),
        col((r) => r.outcome),
        col((r) => r.status ?? null),
        col((r) => r.traceId ?? null),
      ],
    });
    return new Set(rows.map((r) => r.id));
  }

  /**
   * A page, newest first ((at, id) descending), of one tenant's rows or of every row (tenantId null): a
   * keyset read on ix_audit_log_tenant_at or ix_audit_log_at, so a page costs the same at any depth. Answers
   * `limit + 1` rows at most.
   */
  async listPage(
    tenantId: string | null,
    before: AuditPosition | null,
    limit: number,
  ): Promise<Array<AuditRow & { position: AuditPosition }>> {
    const rows = await preparedQuery<RawRow>(this.db, this.pageQuery(tenantId, before, limit));
    return rows.map((r) => {
      const { at, exact } = exactTime(r.at_text);
      return {
        id: r.id,
        at,
        actor: { kind: r.actor_kind, id: r.actor_id },
        action: r.action,
        tenantId: r.tenant_id,
        target: r.target,
        userId: r.user_id,
        requestId: r.request_id,
        outcome: r.outcome,
        status: r.status,
        traceId: r.trace_id,
        details: r.details,
        count: r.count,
        position: { at: exact, id: r.id },
      };
    });
  }

  /**
   * listPage's statement with its values: a named prepared statement, one for a tenant's rows and one for every
   * row. The first page reads before AFTER_ALL, so that it shares the deeper pages' statement and generic plan.
   */
  pageQuery(tenantId: string | null, before: AuditPosition | null, limit: number): pg.QueryConfig {
    const from = before ?? AFTER_ALL;
    return tenantId === null
      ? { name: 'cws_audit_page', text: PAGE_SQL(''), values: [from.at, from.id, limit + 1] }
      : { name: 'cws_audit_page_tenant', text: PAGE_SQL('tenant_id = $4 AND'), values: [from.at, from.id, limit + 1, tenantId] };
  }

  /**
   * Drops an end user's own identifiers from the tenant's rows about them: the user id, the target (their
   * connection's id) and the connect session that acted for them. The rows stay, with what was done, when,
   * by which key and with what outcome. Answers how many rows were scrubbed.
   */
  async forgetUser(tenantId: string, userId: string, manager?: EntityManager): Promise<number> {
    const rows: Array<{ n: number }> = await (manager ?? this.db).query(
      `WITH scrubbed AS (
         UPDATE audit_log
            SET user_id = NULL,
                target = NULL,
                actor_id = CASE WHEN actor_kind = 'connect_session' THEN NULL ELSE actor_id END
          WHERE tenant_id = $1 AND user_id = $2
         RETURNING 1)
       SELECT count(*)::int AS n FROM scrubbed`,
      [tenantId, userId],
    );
    return rows[0].n;
  }

  /**
   * forgetUser for every end user of a deleted tenant, up to `batch` rows in one statement (on the partial
   * ix_audit_log_tenant_user index, so it reads only rows that still name a user). Answers how many it scrubbed.
   */
  async forgetUsersOf(tenantId: string, batch: number): Promise<number> {
    const rows: Array<{ n: number }> = await this.db.query(
      `WITH named AS (
         SELECT id FROM audit_log WHERE tenant_id = $1 AND user_id IS NOT NULL LIMIT $2 FOR UPDATE SKIP LOCKED),
       scrubbed AS (
         UPDATE audit_log a
            SET user_id = NULL,
                target = NULL,
                actor_id = CASE WHEN a.actor_kind = 'connect_session' THEN NULL ELSE a.actor_id END
           FROM named WHERE a.id = named.id
         RETURNING 1)
       SELECT count(*)::int AS n FROM scrubbed`,
      [tenantId, batch],
    );
    return rows[0].n;
  }

  /**
   * Deletes up to `batch` rows older than `before`, oldest first, in a short transaction of its own; null
   * when another instance holds the sweep (it carries on). The batch bounds how long its row locks are held.
   */
  async deleteOlderThan(before: Date, batch: number): Promise<number | null> {
    return this.db.transaction(async (m) => {
      const [lock] = (await m.query('SELECT pg_try_advisory_xact_lock($1) AS ok', [SWEEP_LOCK])) as Array<{ ok: boolean }>;
      if (!lock.ok) return null;
      const rows: Array<{ n: number }> = await m.query(
        `WITH doomed AS (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED),
              gone AS (DELETE FROM audit_log a USING doomed WHERE a.id = doomed.id RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [before, batch],
      );
      return rows[0].n;
    });
  }
}
