import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How the browser runs a connect session: NULL for a full-page redirect back to the returnUrl, `popup` when the
 * browser module opened it in a popup (the callback then ends on the completion page, which posts the outcome
 * to the opener).
 */
export class ConnectSessionDisplay1796600000000 implements MigrationInterface {
  name = 'ConnectSessionDisplay1796600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE connect_sessions ADD COLUMN display text NULL CONSTRAINT ck_connect_sessions_display CHECK (display IN ('popup'))`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connect_sessions DROP COLUMN display`);
  }
}
