import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The OAuth state is bound to the browser that opened the connect link (RFC 6749 §10.12, RFC 9700 §4.7):
 * the SHA-256 of a random value that only that browser holds, in an HttpOnly cookie. A session started
 * before this column existed has none, and its callback is refused: it lives ten minutes at most.
 */
export class ConnectSessionBrowserBinding1796100000000 implements MigrationInterface {
  name = 'ConnectSessionBrowserBinding1796100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connect_sessions ADD COLUMN browser_hash bytea`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connect_sessions DROP COLUMN browser_hash`);
  }
}
