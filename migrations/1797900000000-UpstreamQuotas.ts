import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Upstream budgets (docs/quotas.md). `tenants.quotas`: a tenant's own budgets, `{"read": "400/60s", ...}`, null:
 * its environment's. `quota_windows`: one row per tenant, class and window, the units instances leased from it
 * (`granted`, never past the budget) and what they report of their calls; at most the current window and the two
 * before it are kept per tenant and class (older rows are removed when a window starts). `quota_pauses`: the time
 * until which the upstream asked a tenant's class to wait (its 429), one row per tenant and class. All added, so
 * the previous release runs on it (it reads and writes none of them); both tables go with their tenant.
 */
export class UpstreamQuotas1797900000000 implements MigrationInterface {
  name = 'UpstreamQuotas1797900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants ADD COLUMN IF NOT EXISTS quotas jsonb`);
    await q.query(`CREATE TABLE IF NOT EXISTS quota_windows (
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      class text NOT NULL,
      window_start timestamptz NOT NULL,
      window_ms integer NOT NULL,
      calls integer NOT NULL,
      granted integer NOT NULL DEFAULT 0,
      last_grant integer NOT NULL DEFAULT 0,
      spent integer NOT NULL DEFAULT 0,
      waited integer NOT NULL DEFAULT 0,
      refused integer NOT NULL DEFAULT 0,
      upstream_429 integer NOT NULL DEFAULT 0,
      CONSTRAINT pk_quota_windows PRIMARY KEY (tenant_id, class, window_start)
    )`);
    await q.query(`CREATE TABLE IF NOT EXISTS quota_pauses (
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      class text NOT NULL,
      until timestamptz NOT NULL,
      CONSTRAINT pk_quota_pauses PRIMARY KEY (tenant_id, class)
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS quota_pauses`);
    await q.query(`DROP TABLE IF EXISTS quota_windows`);
    await q.query(`ALTER TABLE tenants DROP COLUMN IF EXISTS quotas`);
  }
}
