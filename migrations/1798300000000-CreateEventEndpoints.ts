import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event endpoints (docs/endpoints.md). The tenant's first endpoint stays its `eventsTargetUrl`, delivered through
 * the events table's own state columns exactly as before; these tables hold the others.
 *
 * - `event_endpoints`: one row per added endpoint: its URL, choice of events, filter, limits, sealed secret(s), and
 *   the failure clock (`failing_since`, `failing_events`) and `not_before` (the last Retry-After) in the database.
 * - `endpoint_deliveries`: one row per event and endpoint: state (`pending`, `delivered`, `failed`, `missed`),
 *   attempts, next attempt, the lease of the attempt running (its fence). Kept as long as its event.
 * - `endpoint_attempts`: each attempt's start (as the rate limit counted it), end, status, duration and error class
 *   (health). Kept as long as its event.
 * - `endpoint_rate_log`: the start of each attempt in the last second per endpoint (rateLimitPerSecond over any
 *   second, across instances): at most rateLimitPerSecond rows per endpoint, older ones deleted at each claim.
 * - `endpoint_fanout`: the outbox of events not fanned out to the added endpoints yet, filled by a trigger on
 *   `events` (so the events the previous release records are fanned out too) only for a tenant that has added
 *   endpoints, and emptied by the relay as it writes the deliveries.
 *
 * Expand only: new tables, a new function and a new trigger; the previous release reads and writes none of them,
 * and its inserts into `events` fire the trigger like this release's.
 */
export class CreateEventEndpoints1798300000000 implements MigrationInterface {
  name = 'CreateEventEndpoints1798300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS event_endpoints (
      id uuid PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      url text NOT NULL,
      description text,
      event_types jsonb,
      filter jsonb,
      rate_limit_per_second integer,
      max_in_flight integer NOT NULL DEFAULT 4,
      disabled boolean NOT NULL DEFAULT false,
      disabled_reason text,
      disabled_at timestamptz,
      secret_enc text NOT NULL,
      secret_prev_enc text,
      secret_prev_until timestamptz,
      failing_since timestamptz,
      failing_events integer NOT NULL DEFAULT 0,
      failing_warned integer NOT NULL DEFAULT 0,
      recovery_due boolean NOT NULL DEFAULT false,
      not_before timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS event_endpoints_tenant ON event_endpoints (tenant_id, created_at, id)`);
    await q.query(`CREATE TABLE IF NOT EXISTS endpoint_deliveries (
      endpoint_id uuid NOT NULL REFERENCES event_endpoints(id) ON DELETE CASCADE,
      event_id uuid NOT NULL,
      tenant_id text NOT NULL,
      received_at timestamptz NOT NULL,
      state text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      retry_from timestamptz NOT NULL DEFAULT now(),
      lease_until timestamptz,
      fence bigint NOT NULL DEFAULT 0,
      first_failed_at timestamptz,
      last_error text,
      delivered_at timestamptz,
      CONSTRAINT pk_endpoint_deliveries PRIMARY KEY (endpoint_id, event_id)
    )`);
    await q.query(
      `CREATE INDEX IF NOT EXISTS endpoint_deliveries_due ON endpoint_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending'`,
    );
    await q.query(
      `CREATE INDEX IF NOT EXISTS endpoint_deliveries_leased ON endpoint_deliveries (endpoint_id) WHERE lease_until IS NOT NULL`,
    );
    await q.query(`CREATE INDEX IF NOT EXISTS endpoint_deliveries_since ON endpoint_deliveries (endpoint_id, received_at)`);
    await q.query(`CREATE INDEX IF NOT EXISTS endpoint_deliveries_received ON endpoint_deliveries (received_at)`);
    await q.query(`CREATE TABLE IF NOT EXISTS endpoint_attempts (
      id bigserial PRIMARY KEY,
      endpoint_id uuid NOT NULL REFERENCES event_endpoints(id) ON DELETE CASCADE,
      event_id uuid NOT NULL,
      started_at timestamptz NOT NULL,
      at timestamptz NOT NULL,
      status integer,
      duration_ms integer NOT NULL,
      error text
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS endpoint_attempts_endpoint ON endpoint_attempts (endpoint_id, at)`);
    await q.query(`CREATE INDEX IF NOT EXISTS endpoint_attempts_at ON endpoint_attempts (at)`);
    await q.query(`CREATE TABLE IF NOT EXISTS endpoint_rate_log (
      endpoint_id uuid NOT NULL REFERENCES event_endpoints(id) ON DELETE CASCADE,
      at timestamptz NOT NULL
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS endpoint_rate_log_endpoint ON endpoint_rate_log (endpoint_id, at)`);
    await q.query(`CREATE TABLE IF NOT EXISTS endpoint_fanout (
      seq bigserial PRIMARY KEY,
      event_id uuid NOT NULL,
      tenant_id text NOT NULL,
      received_at timestamptz NOT NULL
    )`);
    await q.query(`
      CREATE OR REPLACE FUNCTION cws_endpoint_fanout_v1() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF EXISTS (SELECT 1 FROM event_endpoints x WHERE x.tenant_id = NEW.tenant_id) THEN
          INSERT INTO endpoint_fanout (event_id, tenant_id, received_at) VALUES (NEW.id, NEW.tenant_id, NEW.received_at);
        END IF;
        RETURN NULL;
      END
      $fn$`);
    await q.query(`DROP TRIGGER IF EXISTS events_endpoint_fanout ON events`);
    await q.query(`CREATE TRIGGER events_endpoint_fanout AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION cws_endpoint_fanout_v1()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER IF EXISTS events_endpoint_fanout ON events`);
    await q.query(`DROP FUNCTION IF EXISTS cws_endpoint_fanout_v1()`);
    await q.query(`DROP TABLE IF EXISTS endpoint_fanout`);
    await q.query(`DROP TABLE IF EXISTS endpoint_rate_log`);
    await q.query(`DROP TABLE IF EXISTS endpoint_attempts`);
    await q.query(`DROP TABLE IF EXISTS endpoint_deliveries`);
    await q.query(`DROP TABLE IF EXISTS event_endpoints`);
  }
}
