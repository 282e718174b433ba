import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Agent sessions (src/agents, docs/agents.md): a partner's grant to an AI agent to act as one of its users over
 * MCP. Only the SHA-256 of the session token is kept. A session is revoked (never widened) by DELETE, by the
 * deletion of its user's connection (the trigger below, in the deleting statement's transaction, whoever deletes:
 * the API, the console, an erasure, a tenant's purge) and by its tenant's deletion (refused at once by the join on
 * tenants, removed by the cascade). A revocation and the removal of a live session are announced on `cws_changes`
 * (`agent_sessions:<tenant>:<id>`), so every instance drops it from its cache at once; the use stamp
 * (last_used_at) is not. The previous release does not know that table name: its change feed flushes its caches on
 * such a notification, which is rare (a revocation), and correct.
 *
 * The audit trail gets the status of an agent's tool call and its trace id; its actor kinds are no longer listed
 * by a CHECK (the application's list, audit-entry.ts, is the one list: widening a CHECK is a new constraint the
 * previous release could not keep).
 */
export class CreateAgentSessions1797800000000 implements MigrationInterface {
  name = 'CreateAgentSessions1797800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE agent_sessions (
        id                     uuid PRIMARY KEY,
        tenant_id              text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id                text NOT NULL,
        label                  text,
        tools                  text[] NOT NULL,
        token_hash             bytea NOT NULL,
        url_elicitation        boolean NOT NULL DEFAULT false,
        created_at             timestamptz NOT NULL,
        expires_at             timestamptz NOT NULL,
        last_used_at           timestamptz,
        revoked_at             timestamptz,
        revoked_reason         text
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_agent_sessions_token_hash ON agent_sessions (token_hash)`);
    // The tenant's list (keyset on created_at, id), the user's list and the live count per user.
    await q.query(`CREATE INDEX ix_agent_sessions_tenant_page ON agent_sessions (tenant_id, created_at, id)`);
    await q.query(`CREATE INDEX ix_agent_sessions_tenant_user ON agent_sessions (tenant_id, user_id, created_at, id)`);
    // The sweep of expired and revoked rows.
    await q.query(`CREATE INDEX ix_agent_sessions_expires_at ON agent_sessions (expires_at)`);
    await q.query(`CREATE INDEX ix_agent_sessions_revoked_at ON agent_sessions (revoked_at) WHERE revoked_at IS NOT NULL`);

    await q.query(`
      CREATE FUNCTION cws_revoke_agent_sessions_of_users() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE agent_sessions s
           SET revoked_at = now(), revoked_reason = 'connection_deleted'
          FROM (SELECT DISTINCT tenant_id, user_id FROM gone_rows WHERE kind = 'user') g
         WHERE s.tenant_id = g.tenant_id AND s.user_id = g.user_id AND s.revoked_at IS NULL;
        RETURN NULL;
      END
      $$`);
    await q.query(
      `CREATE TRIGGER tr_connections_revoke_agent_sessions AFTER DELETE ON connections REFERENCING OLD TABLE AS gone_rows FOR EACH STATEMENT EXECUTE FUNCTION cws_revoke_agent_sessions_of_users()`,
    );
    await q.query(
      `CREATE TRIGGER tr_agent_sessions_notify_revoked AFTER UPDATE OF revoked_at ON agent_sessions FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION cws_notify_change()`,
    );
    await q.query(
      `CREATE TRIGGER tr_agent_sessions_notify_deleted AFTER DELETE ON agent_sessions FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND OLD.expires_at > now()) EXECUTE FUNCTION cws_notify_change()`,
    );

    await q.query(`ALTER TABLE audit_log ADD COLUMN status integer`);
    await q.query(`ALTER TABLE audit_log ADD COLUMN trace_id text`);
    await q.query(`ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_actor_kind_check`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE audit_log DROP COLUMN trace_id`);
    await q.query(`ALTER TABLE audit_log DROP COLUMN status`);
    await q.query(`DROP TRIGGER tr_connections_revoke_agent_sessions ON connections`);
    await q.query(`DROP FUNCTION cws_revoke_agent_sessions_of_users()`);
    await q.query(`DROP TABLE agent_sessions`);
  }
}
