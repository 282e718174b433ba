import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateConsoleSessions1796500000000 implements MigrationInterface {
  name = 'CreateConsoleSessions1796500000000';

  async up(q: QueryRunner): Promise<void> {
    // An operator's signed-in console: only the SHA-256 of the cookie's secret is kept, so a read of this
    // table cannot be replayed as a session. Every instance serves every session.
    await q.query(`
      CREATE TABLE console_sessions (
        id         uuid PRIMARY KEY,
        token_hash bytea NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX ux_console_sessions_token_hash ON console_sessions (token_hash)`);
    await q.query(`CREATE INDEX ix_console_sessions_expires_at ON console_sessions (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE console_sessions`);
  }
}
