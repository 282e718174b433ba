// Event endpoints (docs/endpoints.md): the per-event cost of delivering to an added endpoint against today's single
// target (eventsTargetUrl), and one event fanned out to 200 endpoints, each as figures of the same run, on the built
// app (its own process, as `npm start` runs it) and a scratch database.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/endpoints.ts
//
// Env: BENCH_EVENTS (2000 events per delivery run), BENCH_ROUNDS (3 rounds of each, alternated), BENCH_FANOUT (200).
//
// - CPU per delivered attempt: the app process's CPU time (PostgreSQL's is not counted) over the events delivered,
//   for N events to eventsTargetUrl (the floor: today's path, pg-boss) and N events to one added endpoint; the ratio
//   of the medians. Target: <= 1.2. The events are written straight into the events table (one statement per 500),
//   as an inbound group commit writes them, so that only delivery is measured.
// - Fan-out: one event to BENCH_FANOUT endpoints: its deliveries are written by one transaction (all rows share one
//   xmin), and the time from recording the event to every endpoint having received it.
// - Isolation: event to first attempt (p50, p99) over 10 healthy endpoints, idle and while an endpoint of the same
//   tenant hangs with BENCH_BACKLOG (10000) events queued for it.
// - A filter's evaluation cost is bench/json-filter.ts's. Not part of `npm test`.
import pg from 'pg';
import { v7 as timeOrderedUuid } from 'uuid';
import { waitUntil, WebhookSink } from '../test/support/webhook-sink.js';
import { cpuMs, finish, json, median, withStack } from './harness.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const FANOUT = Number(process.env.BENCH_FANOUT ?? 200);
const TARGET_RATIO = 1.2;
const ISOLATION_BACKLOG = Number(process.env.BENCH_BACKLOG ?? 10_000);

const APP_ENV = {
  NODE_ENV: 'development', // http to the local sink is allowed outside production only
  LOG_LEVEL: 'warn',
  EVENTS_RELAY_INTERVAL_MS: '50',
  EVENTS_POLL_INTERVAL_MS: '500',
  ENDPOINTS_PER_TENANT: String(FANOUT + 10),
};

finish(
  withStack(APP_ENV, async (stack) => {
    const sink = await WebhookSink.start();
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    const op = { authorization: `Bearer ${stack.operatorKey}`, 'content-type': 'application/json' };
    const call = async <T>(method: string, path: string, body?: unknown): Promise<T> =>
      json<T>(await fetch(`${stack.appUrl}${path}`, { method, headers: op, body: body === undefined ? undefined : JSON.stringify(body) }));
    const tenant = (id: string, over: Record<string, unknown> = {}) =>
      call('POST', '/v1/tenants', { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], ...over });
    /** N events of the tenant, 500 per statement; pending for its eventsTargetUrl when `target`, else no_target. */
    const record = async (tenantId: string, n: number, target: boolean, type = 'record.changed') => {
      for (let i = 0; i < n; i += 500) {
        const k = Math.min(500, n - i);
        const ids = Array.from({ length: k }, () => timeOrderedUuid());
        await db.query(
          `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state, next_attempt_at)
           SELECT id, $2, 'service', $3, jsonb_build_object('n', ord, 'workflow', jsonb_build_object('id', 'wf_' || ord, 'step', 'Review')),
                  now(), $4, now()
             FROM unnest($1::uuid[]) WITH ORDINALITY AS v(id, ord)`,
          [ids, tenantId, type, target ? 'pending' : 'no_target'],
        );
      }
    };
    const delivered = () => sink.accepted().length;
    const run = async (tenantId: string, target: boolean): Promise<number> => {
      const before = delivered();
      const cpu = cpuMs(stack.appProc.pid);
      await record(tenantId, EVENTS, target);
      await waitUntil(`${EVENTS} deliveries`, () => delivered() - before >= EVENTS, 600_000, 20);
      return (cpuMs(stack.appProc.pid) - cpu) / EVENTS;
    };

    try {
      await tenant('single', { eventsTargetUrl: sink.url });
      await tenant('added');
      await call('POST', '/v1/tenants/added/endpoints', { url: sink.url, maxInFlight: 16 });
      await record('single', 200, true);
      await record('added', 200, false);
      await waitUntil('the warm-up', () => delivered() >= 400, 60_000).catch(async (e: unknown) => {
        const events = await db.query(`SELECT tenant_id, delivery_state, count(*)::int AS n FROM events GROUP BY 1, 2`);
        const added = await db.query(`SELECT state, count(*)::int AS n FROM endpoint_deliveries GROUP BY 1`);
        console.log('delivered', delivered(), JSON.stringify(events.rows), JSON.stringify(added.rows));
        throw e;
      });

      const floor: number[] = [];
      const added: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        floor.push(await run('single', true));
        added.push(await run('added', false));
      }
      const ratio = median(added) / median(floor);
      console.log(`CPU per delivered attempt (the app process), ${EVENTS} events x ${ROUNDS} rounds:`);
      console.log(`  eventsTargetUrl (floor): ${floor.map((v) => v.toFixed(3)).join(' ')} ms, median ${median(floor).toFixed(3)} ms`);
      console.log(`  added endpoint:          ${added.map((v) => v.toFixed(3)).join(' ')} ms, median ${median(added).toFixed(3)} ms`);
      console.log(`  ratio ${ratio.toFixed(2)} (target <= ${TARGET_RATIO}): ${ratio <= TARGET_RATIO ? 'ok' : 'OVER'}`);

      // Fan-out: first with every endpoint disabled, so that no attempt rewrites a row (a claim's update gives it a
      // new xmin): the rows as the fan-out wrote them, `missed`. Then enabled, for the time to deliver one event.
      await tenant('fan');
      const ids: string[] = [];
      for (let i = 0; i < FANOUT; i++)
        ids.push(
          (await call<{ id: string }>('POST', '/v1/tenants/fan/endpoints', { url: `${sink.url}?e=${i}`, maxInFlight: 1, disabled: true }))
            .id,
        );
      await record('fan', 1, false, 'fanout.written');
      await waitUntil(
        'the fan-out rows',
        async () => (await db.query(`SELECT 1 FROM endpoint_deliveries WHERE tenant_id = 'fan'`)).rowCount === FANOUT,
      );
      const rows = await db.query<{ xmin: string; n: number }>(
        `SELECT xmin::text AS xmin, count(*)::int AS n FROM endpoint_deliveries WHERE tenant_id = 'fan' GROUP BY 1`,
      );
      for (const id of ids) await call('PATCH', `/v1/tenants/fan/endpoints/${id}`, { disabled: false });
      const before = delivered();
      const started = performance.now();
      await record('fan', 1, false, 'fanout.delivered');
      await waitUntil('the fan-out', () => delivered() - before >= FANOUT, 120_000, 5);
      const allMs = performance.now() - started;
      console.log(`fan-out of one event to ${FANOUT} endpoints:`);
      console.log(
        `  deliveries written by ${rows.rows.length} transaction(s) (${rows.rows.map((r) => r.n).join(', ')} rows): ${rows.rows.length === 1 ? 'ok' : 'SPLIT'}`,
      );
      console.log(`  from recording to all ${FANOUT} received: ${allMs.toFixed(0)} ms`);

      // Isolation: the time from recording an event to its first attempt arriving, over 10 healthy endpoints, idle
      // and then while another endpoint of the same tenant hangs (never answers) with ISOLATION_BACKLOG events queued.
      const healthy = await WebhookSink.start();
      const hanging = await WebhookSink.start();
      hanging.wait = () => new Promise(() => undefined);
      try {
        await tenant('iso');
        for (let i = 0; i < 10; i++)
          await call('POST', '/v1/tenants/iso/endpoints', { url: `${healthy.url}?e=${i}`, eventTypes: ['fresh'] });
        const latencies = async (label: string): Promise<void> => {
          const from = healthy.received.length;
          for (let i = 0; i < 20; i++) {
            const n = Date.now();
            await db.query(
              `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state, next_attempt_at)
               VALUES ($1, 'iso', 'service', 'fresh', jsonb_build_object('k', $2::bigint), now(), 'no_target', now())`,
              [timeOrderedUuid(), n],
            );
            await new Promise((r) => setTimeout(r, 50));
          }
          await waitUntil('the healthy deliveries', () => healthy.received.length - from >= 200, 120_000, 5);
          const arrivals = healthy.received.slice(from).map((d) => d.arrivedAt - (d.body.data as { k: number }).k);
          const sorted = arrivals.sort((a, b) => a - b);
          const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
          console.log(`  ${label}: event to first attempt p50 ${p(0.5)} ms, p99 ${p(0.99)} ms (${sorted.length} attempts)`);
        };
        console.log('isolation, 10 healthy endpoints, 20 events each:');
        await latencies('idle');
        await call('POST', '/v1/tenants/iso/endpoints', { url: hanging.url, eventTypes: ['backlog'], maxInFlight: 4 });
        for (let i = 0; i < ISOLATION_BACKLOG; i += 500)
          await db.query(
            `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state, next_attempt_at)
             SELECT gen_random_uuid(), 'iso', 'service', 'backlog', '{}'::jsonb, now(), 'no_target', now() FROM generate_series(1, 500)`,
          );
        await waitUntil('the hanging endpoint busy', () => hanging.received.length >= 4, 60_000);
        await latencies(`one endpoint hanging with ${ISOLATION_BACKLOG} queued`);
      } finally {
        await healthy.close();
        await hanging.close();
      }
    } finally {
      await db.end();
      await sink.close();
    }
  }),
);
