// Event endpoints (docs/endpoints.md): the per-event cost of delivering to an added endpoint against today's single
// target (eventsTargetUrl), and one event fanned out to 200 endpoints, each as figures of the same run.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/endpoints.ts
//
// Env: BENCH_EVENTS (2000 events per delivery run), BENCH_ROUNDS (3 rounds of each, alternated), BENCH_FANOUT (200).
//
// - CPU per delivered attempt: this process's CPU time (the app, in process, and the sink it delivers to, the same in
//   both runs; PostgreSQL's is not counted) over the events delivered, for N events to eventsTargetUrl (the floor:
//   today's path, pg-boss) and N events to one added endpoint; the ratio of the medians. Target: <= 1.2.
// - Fan-out: one event to BENCH_FANOUT endpoints: its deliveries are written by one transaction (all rows share one
//   xmin), and the time from recording the event to every endpoint having received it.
// - A filter's evaluation cost is bench/json-filter.ts's. Not part of `npm test`.
import { v7 as timeOrderedUuid } from 'uuid';
import { EventsRepository } from '../src/events/events.repository.js';
import { startTestApp } from '../test/support/test-app.js';
import { waitUntil, WebhookSink } from '../test/support/webhook-sink.js';
import { median } from './harness.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const FANOUT = Number(process.env.BENCH_FANOUT ?? 200);
const TARGET_RATIO = 1.2;

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function main(): Promise<void> {
  const sink = await WebhookSink.start();
  const t = await startTestApp({
    env: {
      LOG_LEVEL: 'warn',
      EVENTS_RELAY_INTERVAL_MS: '50',
      EVENTS_POLL_INTERVAL_MS: '500',
      ENDPOINTS_PER_TENANT: String(FANOUT + 10),
    },
  });
  const events = t.app.get(EventsRepository);
  const tenant = async (id: string, over: Record<string, unknown> = {}) => {
    const res = await t.request('POST', '/v1/tenants', {
      body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], ...over },
    });
    if (res.status !== 201) throw new Error(`tenant ${id}: ${res.status}`);
  };
  const record = async (tenantId: string, n: number, type = 'record.changed') => {
    for (let i = 0; i < n; i += 500) {
      const batch = Array.from({ length: Math.min(500, n - i) }, (_, k) => ({
        id: timeOrderedUuid(),
        tenantId,
        source: 'service' as const,
        type,
        payload: { n: i + k, workflow: { id: `wf_${i + k}`, step: 'Review' } },
      }));
      await events.recordMany(batch);
    }
  };
  const delivered = () => sink.accepted().length;

  /** CPU ms per delivered attempt for N events of `tenantId` (delivered to the sink by whichever path it has). */
  const run = async (tenantId: string): Promise<number> => {
    const before = delivered();
    const cpu = cpuNow();
    await record(tenantId, EVENTS);
    await waitUntil(`${EVENTS} deliveries`, () => delivered() - before >= EVENTS, 300_000, 20);
    return (cpuNow() - cpu) / EVENTS;
  };

  try {
    await tenant('single', { eventsTargetUrl: sink.url });
    await tenant('added');
    const made = await t.request<{ id: string }>('POST', '/v1/tenants/added/endpoints', { body: { url: sink.url, maxInFlight: 16 } });
    if (made.status !== 201) throw new Error(`endpoint: ${made.status}`);
    // Warm-up of both paths.
    await record('single', 200);
    await record('added', 200);
    await waitUntil('the warm-up', () => delivered() >= 400, 60_000);

    const floor: number[] = [];
    const added: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      floor.push(await run('single'));
      added.push(await run('added'));
    }
    const ratio = median(added) / median(floor);
    console.log(`CPU per delivered attempt (this process: app + sink), ${EVENTS} events x ${ROUNDS} rounds:`);
    console.log(`  eventsTargetUrl (floor): ${floor.map((v) => v.toFixed(3)).join(' ')} ms, median ${median(floor).toFixed(3)} ms`);
    console.log(`  added endpoint:          ${added.map((v) => v.toFixed(3)).join(' ')} ms, median ${median(added).toFixed(3)} ms`);
    console.log(`  ratio ${ratio.toFixed(2)} (target <= ${TARGET_RATIO}): ${ratio <= TARGET_RATIO ? 'ok' : 'OVER'}`);

    // Fan-out: one event, FANOUT endpoints. First all disabled, so that no attempt rewrites a row (a claim's update
    // gives it a new xmin): the rows as the fan-out wrote them, `missed`. Then enabled, for the time to deliver one.
    await tenant('fan');
    const ids: string[] = [];
    for (let i = 0; i < FANOUT; i++) {
      const res = await t.request<{ id: string }>('POST', '/v1/tenants/fan/endpoints', {
        body: { url: `${sink.url}?e=${i}`, maxInFlight: 1, disabled: true },
      });
      if (res.status !== 201) throw new Error(`fan-out endpoint ${i}: ${res.status}`);
      ids.push(res.body.id);
    }
    await record('fan', 1, 'fanout.written');
    await waitUntil('the fan-out rows', async () => {
      const n = await t.db.query(`SELECT 1 FROM endpoint_deliveries WHERE tenant_id = 'fan'`);
      return n.rowCount === FANOUT;
    });
    const rows = await t.db.query<{ xmin: string; n: number }>(
      `SELECT xmin::text AS xmin, count(*)::int AS n FROM endpoint_deliveries WHERE tenant_id = 'fan' GROUP BY 1`,
    );
    for (const id of ids) await t.request('PATCH', `/v1/tenants/fan/endpoints/${id}`, { body: { disabled: false } });
    const before = delivered();
    const started = performance.now();
    await record('fan', 1, 'fanout.delivered');
    await waitUntil('the fan-out', () => delivered() - before >= FANOUT, 120_000, 5);
    const allMs = performance.now() - started;
    console.log(`fan-out of one event to ${FANOUT} endpoints:`);
    console.log(
      `  deliveries written by ${rows.rows.length} transaction(s) (${rows.rows.map((r) => r.n).join(', ')} rows): ${rows.rows.length === 1 ? 'ok' : 'SPLIT'}`,
    );
    console.log(`  from recording to all ${FANOUT} received: ${allMs.toFixed(0)} ms`);
  } finally {
    await t.close();
    await sink.close();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
