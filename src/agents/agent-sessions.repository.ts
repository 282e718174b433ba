import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, EntityManager } from 'typeorm';

/** Where a page of agent sessions ends: its last session's creation time (PostgreSQL's exact text) and id. */
export interface SessionPosition {
  at: string;
  id: string;
}

/** An agent session as stored: never its token (only the token's SHA-256 is kept, and never read back). */
export interface AgentSession {
  id: string;
  tenantId: string;
  userId: string;
  label: string | null;
  tools: string[];
  /** The last MCP client that initialised with this token declared URL elicitation (SEP-1036). */
  urlElicitation: boolean;
  createdAt: Date;
  expiresAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface NewAgentSession {
  id: string;
  tenantId: string;
  userId: string;
  label: string | null;
  tools: string[];
  tokenHash: Buffer;
  createdAt: Date;
  expiresAt: Date;
}

/** How many live sessions one tenant, and one of its users, may hold (docs/agents.md, "Bounds"). */
export interface SessionBounds {
  perTenant: number;
  perUser: number;
}

interface RawRow {
  id: string;
  tenant_id: string;
  user_id: string;
  label: string | null;
  tools: string[];
  url_elicitation: boolean;
  created_at: Date;
  expires_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  position_at?: string;
}

const COLUMNS = 'id, tenant_id, user_id, label, tools, url_elicitation, created_at, expires_at, last_used_at, revoked_at';
const S_COLUMNS = COLUMNS.split(', ')
  .map((c) => `s.${c}`)
  .join(', ');

/** Every read and write of the agent_sessions table. */
@Injectable()
export class AgentSessionsRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Stores a session unless its tenant or its user already holds the most live ones: the count and the insert
   * run under the tenant's transaction-scoped advisory lock, so the bound holds once across every instance.
   */
  async insertBounded(s: NewAgentSession, bounds: SessionBounds, now: Date): Promise<'inserted' | 'tenant_full' | 'user_full'> {
    return this.db.transaction(async (m) => {
      await m.query(`SELECT pg_advisory_xact_lock(hashtext('agent_sessions'), hashtext($1))`, [s.tenantId]);
      const [counts] = (await m.query(
        `SELECT count(*)::int AS tenant, count(*) FILTER (WHERE user_id = $2)::int AS "user"
           FROM agent_sessions WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > $3`,
        [s.tenantId, s.userId, now],
      )) as Array<{ tenant: number; user: number }>;
      if (counts.tenant >= bounds.perTenant) return 'tenant_full';
      if (counts.user >= bounds.perUser) return 'user_full';
      await m.query(
        `INSERT INTO agent_sessions (id, tenant_id, user_id, label, tools, token_hash, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [s.id, s.tenantId, s.userId, s.label, s.tools, s.tokenHash, s.createdAt, s.expiresAt],
      );
      return 'inserted';
    });
  }

  /** A live session by its token's hash, while its tenant exists (a deleted tenant's sessions are refused at once). */
  async findLiveByTokenHash(tokenHash: Buffer, now: Date): Promise<AgentSession | null> {
    const rows: RawRow[] = await this.db.query(
      `SELECT ${S_COLUMNS} FROM agent_sessions s JOIN tenants t ON t.id = s.tenant_id AND t.deleted_at IS NULL
        WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > $2`,
      [tokenHash, now],
    );
    return rows.length ? toSession(rows[0]) : null;
  }

  /** A page of a tenant's sessions (one user's, when named) in creation order; `limit + 1` rows at most. */
  async listPage(
    tenantId: string,
    userId: string | null,
    after: SessionPosition | null,
    limit: number,
  ): Promise<Array<AgentSession & { position: SessionPosition }>> {
    const params: unknown[] = [tenantId];
    const where = ['tenant_id = $1'];
    if (userId !== null) {
      params.push(userId);
      where.push(`user_id = $${params.length}`);
    }
    if (after) {
      params.push(after.at, after.id);
      where.push(`(created_at, id) > (CAST($${params.length - 1} AS timestamptz), CAST($${params.length} AS uuid))`);
    }
    params.push(limit + 1);
    const rows: RawRow[] = await this.db.query(
      `SELECT ${COLUMNS}, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at
         FROM agent_sessions WHERE ${where.join(' AND ')}
        ORDER BY created_at, id LIMIT $${params.length}`,
      params,
    );
    return rows.map((r) => ({ ...toSession(r), position: { at: r.position_at ?? '', id: r.id } }));
  }

  /** Revokes a session of the tenant: the session, or null when the tenant has none of that id. Revoking twice changes nothing. */
  async revoke(tenantId: string, id: string, at: Date): Promise<AgentSession | null> {
    const revoked: RawRow[] = await this.db.query(
      `WITH revoked AS (
         UPDATE agent_sessions SET revoked_at = $3, revoked_reason = 'revoked'
          WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING ${COLUMNS})
       SELECT * FROM revoked`,
      [tenantId, id, at],
    );
    if (revoked.length) return toSession(revoked[0]);
    const found: RawRow[] = await this.db.query(`SELECT ${COLUMNS} FROM agent_sessions WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    return found.length ? toSession(found[0]) : null;
  }

  /** When the session was last used; written at most once a minute per session (AgentSessionsService). */
  async touch(id: string, at: Date): Promise<void> {
    await this.db.query(`UPDATE agent_sessions SET last_used_at = $2 WHERE id = $1`, [id, at]);
  }

  async setUrlElicitation(id: string, value: boolean): Promise<void> {
    await this.db.query(`UPDATE agent_sessions SET url_elicitation = $2 WHERE id = $1`, [id, value]);
  }

  /** An erased user's sessions (in the erasure's transaction); answers how many. */
  async deleteOfUser(m: EntityManager, tenantId: string, userId: string): Promise<number> {
    const rows: Array<{ n: number }> = await m.query(
      `WITH gone AS (DELETE FROM agent_sessions WHERE tenant_id = $1 AND user_id = $2 RETURNING 1) SELECT count(*)::int AS n FROM gone`,
      [tenantId, userId],
    );
    return rows[0].n;
  }

  /** Removes up to `limit` sessions that expired or were revoked before `before`; answers how many. */
  async deleteDeadBefore(before: Date, limit: number): Promise<number> {
    const rows: Array<{ n: number }> = await this.db.query(
      `WITH gone AS (
         DELETE FROM agent_sessions WHERE id IN (
           SELECT id FROM agent_sessions WHERE expires_at < $1
           UNION
           SELECT id FROM agent_sessions WHERE revoked_at < $1
           LIMIT $2)
         RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [before, limit],
    );
    return rows[0].n;
  }
}

function toSession(r: RawRow): AgentSession {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    userId: r.user_id,
    label: r.label,
    tools: r.tools,
    urlElicitation: r.url_elicitation,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  };
}
