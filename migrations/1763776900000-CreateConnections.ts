import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateConnections1763776900000 implements MigrationInterface {
  name = 'CreateConnections1763776900000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE connections (
        id                      uuid PRIMARY KEY,
        tenant_id               text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        kind                    text NOT NULL CHECK (kind IN ('admin', 'user')),
        user_id                 text,
        upstream_user_id        text NOT NULL,
        upstream_email          text,
        upstream_username       text,
        is_admin                boolean NOT NULL DEFAULT false,
        status                  text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'reauth_required')),
        status_reason           text,
        scopes                  jsonb NOT NULL DEFAULT '[]'::jsonb,
        access_token_enc        text,
        refresh_token_enc       text,
        access_token_expires_at timestamptz,
        refresh_due_at          timestamptz,
        last_refreshed_at       timestamptz,
        refresh_failures        integer NOT NULL DEFAULT 0,
        version                 bigint NOT NULL DEFAULT 1,
        lease_owner             text,
        lease_until             timestamptz,
        created_at              timestamptz NOT NULL DEFAULT now(),
        updated_at              timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT ck_connections_user_id CHECK ((kind = 'user') = (user_id IS NOT NULL))
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_connections_tenant_user ON connections (tenant_id, user_id) WHERE kind = 'user'`);
    await q.query(`CREATE UNIQUE INDEX ux_connections_tenant_admin ON connections (tenant_id) WHERE kind = 'admin'`);
    await q.query(`CREATE INDEX ix_connections_refresh_due ON connections (refresh_due_at) WHERE status = 'active'`);

    await q.query(`
      CREATE TABLE connect_sessions (
        id               uuid PRIMARY KEY,
        tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        kind             text NOT NULL CHECK (kind IN ('admin', 'user')),
        user_id          text,
        return_url       text NOT NULL,
        scopes           jsonb NOT NULL,
        token_hash       bytea NOT NULL,
        state_hash       bytea,
        expires_at       timestamptz NOT NULL,
        started_at       timestamptz,
        state_expires_at timestamptz,
        completed_at     timestamptz,
        created_at       timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_connect_sessions_token ON connect_sessions (token_hash)`);
    await q.query(`CREATE UNIQUE INDEX ux_connect_sessions_state ON connect_sessions (state_hash)`);
    await q.query(`CREATE INDEX ix_connect_sessions_expires ON connect_sessions (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE connect_sessions`);
    await q.query(`DROP TABLE connections`);
  }
}
