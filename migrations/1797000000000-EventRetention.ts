import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Days of partitions created ahead by this migration (the scheduler keeps EVENT_PARTITIONS_AHEAD_DAYS more each tick). */
const AHEAD_DAYS = 14;

/**
 * Retention, erasure and tenant deletion (docs/operations.md, "What is kept").
 *
 * `events` and `event_attempts` become tables partitioned by day: events by `received_at`, attempts by their
 * own `at` (an attempt is never older than its event, so a day of attempts expires with or after that day of
 * events). Expired days go away by DETACH PARTITION CONCURRENTLY and DROP TABLE: no DELETE scans or locks the
 * big tables. A tenant with a shorter window is swept in small batches by the scheduler.
 *
 * No data moves. The existing tables are kept and attached, whole, as the first partition of each
 * (`events_pre_<day>`, `event_attempts_pre_<day>`, from MINVALUE to the cut-off day): a CHECK constraint is
 * added NOT VALID (a moment's lock) and validated (a scan that blocks no reader or writer), and it proves the
 * partition bound, so the ATTACH itself reads nothing. The cut-off is the start of the day after tomorrow
 * (UTC), so rows keep landing in the old table until then even if the validation of a big table is slow; that
 * partition is dropped as a whole once its last day is past the longest window. Daily partitions for the
 * days after it are created here (14 of them) and then by the scheduler, `cws_ensure_event_partitions(day)`.
 *
 * What the previous release does on this schema (expand only):
 * - its INSERTs name no partition key and no seq: `received_at` defaults to now() and is routed to a day
 *   that exists (created ahead), `seq` keeps its sequence, `writer_xid` its default;
 * - its lookups by id (`WHERE id = $1`, UPDATE ... WHERE id = ANY) probe each partition's index on id; nothing
 *   it runs uses ON CONFLICT on these tables;
 * - a partitioned table cannot keep a unique constraint on `id` alone, so the foreign key of event_attempts to
 *   events(id) is dropped (a relaxation: the previous release never relied on it to refuse a write); an
 *   attempt left by a previous release's tenant delete expires with its day;
 * - it ignores the new nullable columns (`events.user_id`, `tenants.event_retention_days`,
 *   `tenants.deleted_at`): it neither hides deleted tenants nor sweeps, which only means it keeps serving
 *   a deleted tenant until its rows are gone.
 *
 * Indexes of the daily partitions are per partition (made by the function on an empty table); the old tables
 * keep the indexes they had, none is built on them. The daily ones have only what a statement uses (id, the
 * events API's order, receipt time, the relay's queue, a user's events): each index of each partition is
 * something the planner weighs on every statement.
 */
export class EventRetention1797000000000 implements MigrationInterface {
  name = 'EventRetention1797000000000';
  // Statements in their own transactions: the validation scans must not hold their locks until the end.
  transaction = false as const;

  async up(q: QueryRunner): Promise<void> {
    const cut = cutoffDay(new Date());
    const cutAt = `${isoDay(cut)}T00:00:00Z`;
    const tag = compactDay(cut);
    await q.query(`ALTER TABLE tenants ADD COLUMN IF NOT EXISTS event_retention_days integer
                     CHECK (event_retention_days BETWEEN 1 AND 400)`);
    await q.query(`ALTER TABLE tenants ADD COLUMN IF NOT EXISTS deleted_at timestamptz`);
    await q.query(`ALTER TABLE events ADD COLUMN IF NOT EXISTS user_id text`);
    await addValidCheck(q, 'events', 'events_pre_range', `received_at < '${cutAt}'`);
    await addValidCheck(q, 'event_attempts', 'event_attempts_pre_range', `at < '${cutAt}'`);

    await q.startTransaction();
    try {
      await q.query(`SET LOCAL lock_timeout = '10s'`);
      await q.query(`ALTER TABLE event_attempts DROP CONSTRAINT IF EXISTS event_attempts_event_id_fkey`);
      await q.query(`ALTER TABLE events RENAME TO events_pre_${tag}`);
      await q.query(`ALTER TABLE event_attempts RENAME TO event_attempts_pre_${tag}`);
      // The sequences outlive the first partition (it is dropped one day).
      await q.query(`ALTER SEQUENCE events_seq_seq OWNED BY NONE`);
      await q.query(`ALTER SEQUENCE event_attempts_id_seq OWNED BY NONE`);
      await q.query(`
        CREATE TABLE events (
          seq                 bigint NOT NULL DEFAULT nextval('events_seq_seq'),
          id                  uuid NOT NULL,
          tenant_id           text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          source              text NOT NULL CONSTRAINT events_source_check CHECK (source IN ('upstream', 'service')),
          receiver_id         uuid,
          type                text NOT NULL,
          payload             jsonb NOT NULL,
          received_at         timestamptz NOT NULL DEFAULT now(),
          delivery_state      text NOT NULL DEFAULT 'pending' CONSTRAINT events_delivery_state_check
                                CHECK (delivery_state IN ('pending', 'delivered', 'dead', 'no_target', 'filtered')),
          delivery_attempts   integer NOT NULL DEFAULT 0,
          last_delivery_error text,
          next_attempt_at     timestamptz,
          delivered_at        timestamptz,
          enqueued_at         timestamptz,
          retry_from          timestamptz,
          traceparent         text,
          writer_xid          xid8 NOT NULL DEFAULT pg_current_xact_id(),
          user_id             text
        ) PARTITION BY RANGE (received_at)`);
      await q.query(`
        CREATE TABLE event_attempts (
          id          bigint NOT NULL DEFAULT nextval('event_attempts_id_seq'),
          event_id    uuid NOT NULL,
          at          timestamptz NOT NULL,
          status      integer,
          duration_ms integer NOT NULL,
          error       text
        ) PARTITION BY RANGE (at)`);
      await q.query(`ALTER TABLE events ATTACH PARTITION events_pre_${tag} FOR VALUES FROM (MINVALUE) TO ('${cutAt}')`);
      await q.query(`ALTER TABLE event_attempts ATTACH PARTITION event_attempts_pre_${tag} FOR VALUES FROM (MINVALUE) TO ('${cutAt}')`);
      // The one definition of a day's partitions, used here and by the scheduler (events/event-partitions.ts).
      await q.query(ENSURE_FUNCTION);
      for (let d = 0; d < AHEAD_DAYS; d++) {
        await q.query(`SELECT cws_ensure_event_partitions($1::date)`, [isoDay(new Date(cut.getTime() + d * DAY_MS))]);
      }
      await q.commitTransaction();
    } catch (e) {
      await q.rollbackTransaction();
      throw e;
    }
  }

  /**
   * Back to plain tables: the first partition becomes `events` again and the rows of the daily partitions
   * (at most a window's worth) are copied into it.
   */
  async down(q: QueryRunner): Promise<void> {
    const parts = (await q.query(
      `SELECT c.relname AS name, p.relname AS parent FROM pg_inherits i
         JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.relname IN ('events', 'event_attempts')`,
    )) as Array<{ name: string; parent: string }>;
    const pre = (parent: string) => parts.find((p) => p.parent === parent && p.name.startsWith(`${parent}_pre_`))?.name;
    const eventsPre = pre('events');
    const attemptsPre = pre('event_attempts');
    if (!eventsPre || !attemptsPre) throw new Error('the first partitions of events and event_attempts are missing');
    await q.startTransaction();
    try {
      await q.query(`ALTER TABLE events DETACH PARTITION ${eventsPre}`);
      await q.query(`ALTER TABLE event_attempts DETACH PARTITION ${attemptsPre}`);
      await q.query(`ALTER TABLE ${eventsPre} DROP CONSTRAINT events_pre_range`);
      await q.query(`ALTER TABLE ${attemptsPre} DROP CONSTRAINT event_attempts_pre_range`);
      await q.query(`INSERT INTO ${eventsPre} SELECT * FROM events`);
      await q.query(`INSERT INTO ${attemptsPre} SELECT * FROM event_attempts`);
      await q.query(`DROP TABLE events`);
      await q.query(`DROP TABLE event_attempts`);
      await q.query(`DROP FUNCTION cws_ensure_event_partitions(date)`);
      await q.query(`ALTER TABLE ${eventsPre} RENAME TO events`);
      await q.query(`ALTER TABLE ${attemptsPre} RENAME TO event_attempts`);
      await q.query(`ALTER SEQUENCE events_seq_seq OWNED BY events.seq`);
      await q.query(`ALTER SEQUENCE event_attempts_id_seq OWNED BY event_attempts.id`);
      await q.query(`DELETE FROM event_attempts a WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id)`);
      await q.query(`ALTER TABLE event_attempts ADD CONSTRAINT event_attempts_event_id_fkey
                       FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE`);
      await q.query(`ALTER TABLE events DROP COLUMN user_id`);
      await q.query(`ALTER TABLE tenants DROP COLUMN deleted_at`);
      await q.query(`ALTER TABLE tenants DROP COLUMN event_retention_days`);
      await q.commitTransaction();
    } catch (e) {
      await q.rollbackTransaction();
      throw e;
    }
  }
}

const DAY_MS = 86_400_000;

/** The start (UTC) of the day after tomorrow: the old tables take every row before it. */
function cutoffDay(now: Date): Date {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return new Date(today + 2 * DAY_MS);
}

function isoDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

function compactDay(d: Date): string {
  return isoDay(d).replaceAll('-', '');
}

/** Adds a CHECK constraint NOT VALID (a moment's lock), then validates it (reads, blocks no writer). Idempotent. */
async function addValidCheck(q: QueryRunner, table: string, name: string, check: string): Promise<void> {
  const found = (await q.query(`SELECT 1 FROM pg_constraint WHERE conname = $1 AND conrelid = $2::regclass`, [name, table])) as unknown[];
  if (found.length === 0) {
    await q.query(`SET lock_timeout = '10s'`);
    await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK (${check}) NOT VALID`);
    await q.query(`RESET lock_timeout`);
  }
  await q.query(`ALTER TABLE ${table} VALIDATE CONSTRAINT ${name}`);
}

/**
 * Creates the partitions of one day (UTC) of events and of attempts, with their indexes, when missing. Made as
 * plain tables and attached, so the parents are locked only in SHARE UPDATE EXCLUSIVE mode (CREATE TABLE ...
 * PARTITION OF would take ACCESS EXCLUSIVE on them).
 */
const ENSURE_FUNCTION = `
CREATE OR REPLACE FUNCTION cws_ensure_event_partitions(day date) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
  ev text := 'events_p' || to_char(day, 'YYYYMMDD');
  at text := 'event_attempts_p' || to_char(day, 'YYYYMMDD');
  made integer := 0;
BEGIN
  IF to_regclass(ev) IS NULL THEN
    EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', ev);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (received_at >= %L AND received_at < %L)', ev, ev || '_range', lo, hi);
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (id)', ev || '_id', ev);
    EXECUTE format('CREATE INDEX %I ON %I (tenant_id, writer_xid, seq)', ev || '_tenant_writer_seq', ev);
    EXECUTE format('CREATE INDEX %I ON %I (tenant_id, received_at, seq)', ev || '_tenant_received', ev);
    EXECUTE format('CREATE INDEX %I ON %I (tenant_id, user_id) WHERE source = ''service''', ev || '_tenant_user', ev);
    EXECUTE format('CREATE INDEX %I ON %I (seq) WHERE delivery_state = ''pending'' AND enqueued_at IS NULL', ev || '_unqueued', ev);
    EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', ev, lo, hi);
    made := made + 1;
  END IF;
  IF to_regclass(at) IS NULL THEN
    EXECUTE format('CREATE TABLE %I (LIKE event_attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', at);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (at >= %L AND at < %L)', at, at || '_range', lo, hi);
    EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (id)', at);
    EXECUTE format('CREATE INDEX %I ON %I (event_id, id)', at || '_event', at);
    EXECUTE format('ALTER TABLE event_attempts ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', at, lo, hi);
    made := made + 1;
  END IF;
  RETURN made;
END
$fn$`;
