import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Budgets held in any window (docs/quotas.md, "The bound"). `quota_logs`: one row per tenant and class, the units
 * granted to instances over the last span (a window, plus a unit's life, plus the jitter allowed between a call's
 * admission and its arrival upstream), in a ring of buckets: `total` (all lanes), `people` (interactive) and
 * `agents`, each `ceil(span_ms / bucket_ms) + 1` integers, `head` the index (ms since the epoch / bucket_ms) of the
 * newest. Its size is fixed per tenant and class: the table grows with tenants, never with traffic.
 *
 * `cws_quota_lease_v1` is the lease: the row is the class's one lock, so two instances' leases are applied one
 * after the other, each seeing the other's grant, on the database's clock (an instance's clock is never compared
 * with another's). The lane rule (people strictly first) is in it; its constants are parameters, owned by
 * src/quota/lane-policy.ts. `p_at_ms` stands in for the clock in tests (null: clock_timestamp()). A change to the
 * rule is a new function (a new name), so that the release before it keeps its own.
 *
 * Expand only: `quota_windows` stays, now holding only the figures a tenant shows; the release before this one
 * reads and writes none of these.
 */
export class QuotaSlidingLog1798000000000 implements MigrationInterface {
  name = 'QuotaSlidingLog1798000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS quota_logs (
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      class text NOT NULL,
      span_ms integer NOT NULL,
      bucket_ms integer NOT NULL,
      head bigint NOT NULL,
      total integer[] NOT NULL,
      people integer[] NOT NULL,
      agents integer[] NOT NULL,
      CONSTRAINT pk_quota_logs PRIMARY KEY (tenant_id, class)
    )`);
    await q.query(`
      CREATE OR REPLACE FUNCTION cws_quota_lease_v1(
        p_tenant text, p_class text, p_span_ms integer, p_bucket_ms integer, p_calls integer, p_lane text, p_want integer,
        p_people_floor integer, p_headroom float8, p_parts integer, p_burst float8, p_at_ms float8)
      RETURNS TABLE (units integer, bucket bigint, wait_ms integer, paused_until float8)
      LANGUAGE plpgsql VOLATILE
      AS $fn$
      DECLARE
        at_ms float8 := coalesce(p_at_ms, extract(epoch FROM clock_timestamp()) * 1000);
        k bigint := floor(at_ms / p_bucket_ms)::bigint;
        n integer := ceil(p_span_ms::float8 / p_bucket_ms)::integer + 1;
        recent integer := greatest(1, ceil((n - 1)::float8 / p_parts)::integer);
        r quota_logs%ROWTYPE;
        i bigint;
        j integer;
        s integer;
        t_all integer := 0; t_people integer := 0; t_agents integer := 0;
        r_people integer := 0; r_agents integer := 0; r_back integer := 0;
        old_all bigint := NULL; rec_agents bigint := NULL; rec_back bigint := NULL;
        rate_people float8; rate_agents float8; ahead float8; fits integer; cum integer := 0;
        share integer; pace integer; room integer; got integer; frees float8 := 0;
      BEGIN
        SELECT * INTO r FROM quota_logs l WHERE l.tenant_id = p_tenant AND l.class = p_class FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO quota_logs (tenant_id, class, span_ms, bucket_ms, head, total, people, agents)
            VALUES (p_tenant, p_class, p_span_ms, p_bucket_ms, k, array_fill(0, ARRAY[n]), array_fill(0, ARRAY[n]), array_fill(0, ARRAY[n]))
            ON CONFLICT ON CONSTRAINT pk_quota_logs DO NOTHING;
          SELECT * INTO r FROM quota_logs l WHERE l.tenant_id = p_tenant AND l.class = p_class FOR UPDATE;
        END IF;
        IF r.span_ms <> p_span_ms OR r.bucket_ms <> p_bucket_ms OR array_length(r.total, 1) <> n THEN
          -- A new budget: what was granted under the old one counts as granted now (never less than the truth).
          SELECT coalesce(sum(x), 0) INTO t_all FROM unnest(r.total) x;
          SELECT coalesce(sum(x), 0) INTO t_people FROM unnest(r.people) x;
          SELECT coalesce(sum(x), 0) INTO t_agents FROM unnest(r.agents) x;
          r.total := array_fill(0, ARRAY[n]); r.people := array_fill(0, ARRAY[n]); r.agents := array_fill(0, ARRAY[n]);
          r.total[(k % n) + 1] := t_all; r.people[(k % n) + 1] := t_people; r.agents[(k % n) + 1] := t_agents;
          r.head := k; r.span_ms := p_span_ms; r.bucket_ms := p_bucket_ms;
          t_all := 0; t_people := 0; t_agents := 0;
        END IF;
        -- The clock never goes back for the log: a grant is never filed under a bucket older than the newest.
        IF k < r.head THEN k := r.head; END IF;
        IF k > r.head THEN
          IF k - r.head >= n THEN
            r.total := array_fill(0, ARRAY[n]); r.people := array_fill(0, ARRAY[n]); r.agents := array_fill(0, ARRAY[n]);
          ELSE
            -- (a FOR loop's variable is an integer: bucket indexes are not, so the loops count offsets)
            FOR j IN 1 .. (k - r.head)::integer LOOP
              i := r.head + j;
              r.total[(i % n) + 1] := 0; r.people[(i % n) + 1] := 0; r.agents[(i % n) + 1] := 0;
            END LOOP;
          END IF;
          r.head := k;
        END IF;
        -- The ring holds buckets head - n + 1 .. head, oldest first here.
        FOR j IN 1 .. n LOOP
          i := r.head - n + j;
          s := (((i % n) + n) % n) + 1;
          t_all := t_all + r.total[s];
          t_people := t_people + r.people[s];
          t_agents := t_agents + r.agents[s];
          IF r.total[s] > 0 AND old_all IS NULL THEN old_all := i; END IF;
          IF i > r.head - recent THEN
            r_people := r_people + r.people[s];
            r_agents := r_agents + r.agents[s];
            r_back := r_back + r.total[s] - r.people[s] - r.agents[s];
            IF r.agents[s] > 0 AND rec_agents IS NULL THEN rec_agents := i; END IF;
            IF r.total[s] - r.people[s] - r.agents[s] > 0 AND rec_back IS NULL THEN rec_back := i; END IF;
          END IF;
        END LOOP;
        -- People's (agents') pace per bucket: the most of their last span's and their last tenth's (people: at least the floor's).
        rate_people := greatest(p_people_floor::float8, t_people::float8, r_people::float8 * p_parts) / (n - 1);
        rate_agents := greatest(t_agents::float8, r_agents::float8 * p_parts) / (n - 1);
        room := p_calls - t_all;
        IF room <= 0 THEN frees := greatest(frees, (old_all + n) * p_bucket_ms::float8 - at_ms); END IF;
        IF p_lane <> 'interactive' THEN
          -- What a later lane may take: at every moment d buckets ahead within the coming span, what will still be counted
          -- then, plus the lanes before it at their pace (x headroom) until a tenth of the span past that moment, fits
          -- the budget. So people find room for their pace however much agents took before them, and a burst of theirs
          -- still in the log is counted until it leaves. Its soonest change: the next bucket.
          ahead := p_headroom * (rate_people + CASE WHEN p_lane = 'background' THEN rate_agents ELSE 0 END);
          fits := p_calls;
          FOR j IN 0 .. n - 1 LOOP
            fits := least(fits, floor(p_calls - (t_all - cum) - ahead * (j + recent))::integer);
            i := r.head - n + 1 + j;
            cum := cum + r.total[(((i % n) + n) % n) + 1];
          END LOOP;
          IF fits <= 0 THEN frees := greatest(frees, (r.head + 1) * p_bucket_ms::float8 - at_ms); END IF;
          -- The pace: over a tenth of the span, at most burst tenths of the lane's share of a span.
          share := greatest(0, p_calls - ceil(ahead * (n - 1))::integer);
          pace := ceil(share * p_burst / p_parts)::integer - CASE WHEN p_lane = 'agent' THEN r_agents ELSE r_back END;
          IF pace <= 0 THEN
            frees := greatest(frees, coalesce((CASE WHEN p_lane = 'agent' THEN rec_agents ELSE rec_back END + recent) * p_bucket_ms::float8 - at_ms,
              (r.head + 1) * p_bucket_ms::float8 - at_ms));
          END IF;
          room := least(room, fits, pace);
        END IF;
        got := greatest(0, least(p_want, room));
        IF got > 0 THEN
          s := (k % n) + 1;
          r.total[s] := r.total[s] + got;
          IF p_lane = 'interactive' THEN r.people[s] := r.people[s] + got;
          ELSIF p_lane = 'agent' THEN r.agents[s] := r.agents[s] + got;
          END IF;
        END IF;
        UPDATE quota_logs l SET span_ms = r.span_ms, bucket_ms = r.bucket_ms, head = r.head, total = r.total, people = r.people, agents = r.agents
          WHERE l.tenant_id = p_tenant AND l.class = p_class;
        RETURN QUERY SELECT got, k, CASE WHEN got >= p_want THEN 0 ELSE greatest(1, ceil(frees))::integer END,
          (SELECT (extract(epoch FROM p.until) * 1000)::float8 FROM quota_pauses p
            WHERE p.tenant_id = p_tenant AND p.class = p_class AND p.until > now());
      END
      $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `DROP FUNCTION IF EXISTS cws_quota_lease_v1(text, text, integer, integer, integer, text, integer, integer, float8, integer, float8, float8)`,
    );
    await q.query(`DROP TABLE IF EXISTS quota_logs`);
  }
}
