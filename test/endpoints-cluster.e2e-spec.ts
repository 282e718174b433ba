import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EventsRepository } from '../src/events/events.repository.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';
import { mostInAnyWindow } from './support/windows.js';

/** A sink that counts the requests it holds at once, each held `holdMs` (or until `release` for `hang`). */
class CountingSink {
  current = 0;
  max = 0;
  arrivals: number[] = [];
  private releases: Array<() => void> = [];
  constructor(
    readonly sink: WebhookSink,
    holdMs: number | 'hang',
  ) {
    sink.wait = () => {
      this.current++;
      this.max = Math.max(this.max, this.current);
      this.arrivals.push(Date.now());
      const held = holdMs === 'hang' ? new Promise<void>((r) => this.releases.push(r)) : new Promise<void>((r) => setTimeout(r, holdMs));
      return held.then(() => {
        this.current--;
      });
    };
  }
  release(): void {
    for (const r of this.releases.splice(0)) r();
  }
}

/** The most arrivals within any `spanMs` (a sliding window over the arrival times, not clock seconds). */
describe('event endpoints over three instances on one database: maxInFlight, rateLimitPerSecond, isolation', () => {
  let a: TestApp;
  const others: TestApp[] = [];
  const sinks: CountingSink[] = [];

  async function sink(holdMs: number | 'hang'): Promise<CountingSink> {
    const s = new CountingSink(await WebhookSink.start(), holdMs);
    sinks.push(s);
    return s;
  }

  async function endpoint(tenantId: string, body: Record<string, unknown>): Promise<string> {
    const res = await a.request<{ id: string }>('POST', `/v1/tenants/${tenantId}/endpoints`, { body });
    expect(res.status).toBe(201);
    return res.body.id;
  }

  async function emit(tenantId: string, type: string, count: number): Promise<void> {
    // One statement (the inbound group commit's): the events are queued together, not one round trip each.
    const events = Array.from({ length: count }, (_, i) => ({ id: v7(), tenantId, source: 'service' as const, type, payload: { n: i } }));
    const stored = await a.app.get(EventsRepository).recordMany(events);
    expect(stored.size).toBe(count);
  }

  beforeAll(async () => {
    const env = {
      EVENTS_ATTEMPT_TIMEOUT_MS: '4000',
      EVENTS_RETRY_BASE_MS: '200',
      EVENTS_RETRY_MAX_MS: '500',
      EVENTS_RELAY_INTERVAL_MS: '100',
    };
    a = await startTestApp({ env });
    others.push(await startSecondInstance(a, env), await startSecondInstance(a, env));
    for (const id of ['limits', 'iso']) {
      const res = await a.request('POST', '/v1/tenants', {
        body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
      });
      expect(res.status).toBe(201);
    }
  }, 60_000);
  afterAll(async () => {
    for (const s of sinks) s.release();
    for (const o of others) await o.close();
    await a?.close();
    for (const s of sinks) await s.sink.close();
  });

  it('holds maxInFlight over all instances and delivers every event once', async () => {
    const s = await sink(250);
    await endpoint('limits', { url: s.sink.url, maxInFlight: 3, eventTypes: ['inflight.test'] });
    await emit('limits', 'inflight.test', 30);
    await waitUntil('30 deliveries', () => s.sink.accepted().length >= 30, 30_000);
    expect(s.max).toBeLessThanOrEqual(3);
    expect(s.max).toBeGreaterThanOrEqual(2);
    expect(s.sink.received).toHaveLength(30);
    expect(new Set(s.sink.received.map((d) => d.headers['webhook-id'])).size).toBe(30);
  }, 40_000);

  it('holds rateLimitPerSecond over all instances, in any second', async () => {
    const s = await sink(0);
    await endpoint('limits', { url: s.sink.url, maxInFlight: 16, rateLimitPerSecond: 10, eventTypes: ['rate.test'] });
    await emit('limits', 'rate.test', 40);
    await waitUntil('40 deliveries', () => s.sink.accepted().length >= 40, 30_000);
    // The bound is on the attempts' starts as the database counted them (over all instances, any second); an
    // attempt reaches the sink a little after its start, by a transit time that varies on a loaded machine.
    await waitUntil('40 attempts recorded', async () => {
      const n = await a.db.query(`SELECT 1 FROM endpoint_attempts a JOIN event_endpoints e ON e.id = a.endpoint_id WHERE e.url = $1`, [
        s.sink.url,
      ]);
      return n.rowCount === 40;
    });
    const starts = await a.db.query<{ ms: number }>(
      `SELECT extract(epoch FROM a.started_at) * 1000 AS ms FROM endpoint_attempts a JOIN event_endpoints e ON e.id = a.endpoint_id
        WHERE e.url = $1`,
      [s.sink.url],
    );
    expect(starts.rows).toHaveLength(40);
    expect(
      mostInAnyWindow(
        starts.rows.map((r) => Number(r.ms)),
        1000,
      ),
    ).toBeLessThanOrEqual(10);
    expect(
      mostInAnyWindow(
        starts.rows.map((r) => Number(r.ms)),
        1000,
      ),
    ).toBeGreaterThanOrEqual(8);
    // Paced: a tenth of the second's budget in any 100 ms, never the whole second in one burst.
    expect(
      mostInAnyWindow(
        starts.rows.map((r) => Number(r.ms)),
        100,
      ),
    ).toBe(1);
    expect(Math.max(...s.arrivals) - Math.min(...s.arrivals)).toBeGreaterThanOrEqual(2900);
  }, 40_000);

  it('a hanging endpoint with a backlog holds no other endpoint back', async () => {
    const hanging = await sink('hang');
    const healthy = await sink(0);
    await endpoint('iso', { url: hanging.sink.url, maxInFlight: 4, eventTypes: ['backlog'] });
    await endpoint('iso', { url: healthy.sink.url, eventTypes: ['fresh'] });
    await emit('iso', 'backlog', 300);
    await waitUntil('the hanging endpoint full', () => hanging.current >= 4);
    await emit('iso', 'fresh', 20);
    await waitUntil('the healthy endpoint served', () => healthy.sink.accepted().length >= 20, 10_000);
    expect(hanging.max).toBeLessThanOrEqual(4);
    const pending = await a.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM endpoint_deliveries d JOIN event_endpoints e ON e.id = d.endpoint_id
        WHERE e.tenant_id = 'iso' AND e.url = $1 AND d.state = 'pending'`,
      [hanging.sink.url],
    );
    expect(pending.rows[0].n).toBeGreaterThan(250);
  }, 40_000);
});
