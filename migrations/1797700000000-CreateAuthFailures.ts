import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * auth_failures: failed credentials counted for the throttle (docs/security.md, "Credential guessing"), shared
 * by every instance and kept across restarts. One row per (kind, client): `kind` is `api_key`, `sign_in` or
 * `sign_in_all` (every client together, client `*`); a window starts at a client's first failure and the row
 * is reused by the next one. Instances add their failures in batches (at most one statement per instance every
 * 200 ms), read back the totals, and read the rows at or past a bound that changed lately (`updated_at`, the
 * database's clock); rows whose window has ended are swept (`window_start`). A new table: nothing the previous
 * release uses is touched.
 */
export class CreateAuthFailures1797700000000 implements MigrationInterface {
  name = 'CreateAuthFailures1797700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE auth_failures (
        kind         text NOT NULL,
        client       text NOT NULL,
        window_start timestamptz NOT NULL,
        failures     integer NOT NULL CHECK (failures >= 0),
        updated_at   timestamptz NOT NULL,
        PRIMARY KEY (kind, client)
      )`);
    await q.query(`CREATE INDEX ix_auth_failures_updated_at ON auth_failures (updated_at)`);
    await q.query(`CREATE INDEX ix_auth_failures_window_start ON auth_failures (window_start)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE auth_failures`);
  }
}
