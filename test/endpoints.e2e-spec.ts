import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EventsRepository } from '../src/events/events.repository.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';
import { verifySignature, waitUntil, WebhookSink, type SinkDelivery } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface Health {
  state: string;
  failingSince?: string;
  disabledReason?: string;
  successRate24h: number | null;
  p99Ms24h: number | null;
  pending: number;
  oldestPendingSeconds: number;
}
interface Endpoint {
  id: string;
  url: string;
  description: string | null;
  eventTypes: string[] | null;
  filter: Record<string, unknown> | null;
  rateLimitPerSecond: number | null;
  maxInFlight: number | null;
  disabled: boolean;
  health: Health;
  secret?: string;
}

const FIRST = '00000000-0000-0000-0000-000000000000';
const CLOCK_ENV = {
  EVENTS_RETRY_BASE_MS: '100',
  EVENTS_RETRY_MAX_MS: '300',
  EVENTS_RETRY_SPAN_MS: '3000',
  EVENTS_RELAY_INTERVAL_MS: '100',
  EVENTS_POLL_INTERVAL_MS: '500',
  EVENTS_MAINTENANCE_SECONDS: '1',
  ENDPOINTS_PER_TENANT: '4',
  ENDPOINT_DISABLE_AFTER: '10s',
  // An attempt whose outcome could not be written is taken again when its lease ends (this plus 10 s).
  EVENTS_ATTEMPT_TIMEOUT_MS: '1000',
};

describe('event endpoints (API.md section 13): routes, validation, signed delivery, disable and recovery', () => {
  let t: TestApp;
  const sinks: WebhookSink[] = [];
  let target: WebhookSink;

  async function sink(): Promise<WebhookSink> {
    const s = await WebhookSink.start();
    sinks.push(s);
    return s;
  }

  async function tenant(id: string, over: Record<string, unknown> = {}): Promise<string> {
    const res = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants', {
      body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], ...over },
    });
    expect(res.status).toBe(201);
    return res.body.eventsSecret;
  }

  async function create(tenantId: string, body: Record<string, unknown>): Promise<Endpoint & { secret: string }> {
    const res = await t.request<Endpoint & { secret: string }>('POST', `/v1/tenants/${tenantId}/endpoints`, { body });
    expect(res.status).toBe(201);
    return res.body;
  }

  async function emit(tenantId: string, type: string, data: unknown): Promise<void> {
    await t.app.get(EventsRepository).record({ tenantId, source: 'service', type, payload: data });
  }

  async function get(tenantId: string, id: string): Promise<Endpoint> {
    const res = await t.request<Endpoint>('GET', `/v1/tenants/${tenantId}/endpoints/${id}`);
    expect(res.status).toBe(200);
    return res.body;
  }

  function ofType(s: WebhookSink, type: string): SinkDelivery[] {
    return s.received.filter((d) => d.body.type === type);
  }

  beforeAll(async () => {
    target = await WebhookSink.start();
    sinks.push(target);
    t = await startTestApp({ env: CLOCK_ENV });
    await tenant('acme', { eventsTargetUrl: target.url });
  });
  afterAll(async () => {
    await t?.close();
    for (const s of sinks) await s.close();
  });

  it('lists eventsTargetUrl as the first endpoint, under the nil UUID, without a secret', async () => {
    const res = await t.request<{ endpoints: Endpoint[] }>('GET', '/v1/tenants/acme/endpoints');
    expect(res.status).toBe(200);
    expect(res.body.endpoints).toHaveLength(1);
    expect(res.body.endpoints[0]).toMatchObject({ id: FIRST, url: target.url, disabled: false, maxInFlight: null });
    expect(res.body.endpoints[0].health).toMatchObject({ state: 'healthy', pending: 0 });
    expect(JSON.stringify(res.body)).not.toContain('whsec_');
  });

  it('creates an endpoint with its secret shown once; reads, changes and deletes it', async () => {
    const s = await sink();
    const ep = await create('acme', { url: s.url, description: 'pipeline', eventTypes: ['record.*'] });
    expect(ep.secret).toMatch(/^whsec_/);
    expect(ep).toMatchObject({ url: s.url, description: 'pipeline', eventTypes: ['record.*'], maxInFlight: 4, rateLimitPerSecond: null });
    const read = await get('acme', ep.id);
    expect(read.secret).toBeUndefined();
    expect(JSON.stringify(read)).not.toContain(ep.secret);
    expect(read.health).toEqual({ state: 'healthy', successRate24h: null, p99Ms24h: null, pending: 0, oldestPendingSeconds: 0 });
    const stored = await t.db.query<{ secret_enc: string }>('SELECT secret_enc FROM event_endpoints WHERE id = $1', [ep.id]);
    expect(stored.rows[0].secret_enc).not.toContain(ep.secret.slice(6));
    const patched = await t.request<Endpoint>('PATCH', `/v1/tenants/acme/endpoints/${ep.id}`, {
      body: { maxInFlight: 8, rateLimitPerSecond: 50, description: null },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ maxInFlight: 8, rateLimitPerSecond: 50, description: null });
    const audit = await t.db.query<{ action: string }>(`SELECT action FROM audit_log WHERE target = $1 ORDER BY at`, [
      `endpoints/${ep.id}`,
    ]);
    expect(audit.rows.map((r) => r.action)).toEqual(['endpoint.created', 'endpoint.updated']);
    expect((await t.request('DELETE', `/v1/tenants/acme/endpoints/${ep.id}`)).status).toBe(204);
    const gone = await t.request<ErrorBody>('GET', `/v1/tenants/acme/endpoints/${ep.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('endpoint_not_found');
  });

  it('reads its health over the latest 10,000 attempts of the last 24 h at most', async () => {
    const s = await sink();
    const ep = await create('acme', { url: s.url, eventTypes: ['health.*'] });
    // 500 failed attempts two hours ago, then 10,000 that succeeded in the last hour: only the latest 10,000 count.
    await t.db.query(
      `INSERT INTO endpoint_attempts (endpoint_id, event_id, started_at, at, status, duration_ms, error)
       SELECT $1, gen_random_uuid(), now() - interval '2 hours', now() - interval '2 hours' + n * interval '1 millisecond', 500, 900, 'http_500'
         FROM generate_series(1, 500) n`,
      [ep.id],
    );
    await t.db.query(
      `INSERT INTO endpoint_attempts (endpoint_id, event_id, started_at, at, status, duration_ms, error)
       SELECT $1, gen_random_uuid(), now() - interval '1 hour', now() - interval '1 hour' + n * interval '1 millisecond', 200, 20, NULL
         FROM generate_series(1, 10000) n`,
      [ep.id],
    );
    const read = await get('acme', ep.id);
    expect(read.health).toMatchObject({ successRate24h: 1, p99Ms24h: 20 });
    await t.db.query(
      `DELETE FROM endpoint_attempts WHERE endpoint_id = $1 AND error IS NULL AND at > now() - interval '1 hour' + interval '9 seconds'`,
      [ep.id],
    );
    const mixed = await get('acme', ep.id);
    expect(mixed.health.successRate24h).toBeLessThan(1);
    expect(mixed.health.p99Ms24h).toBe(900);
    expect((await t.request('DELETE', `/v1/tenants/acme/endpoints/${ep.id}`)).status).toBe(204);
  });

  it('refuses bad input with 400 validation_failed (a bad filter names its path), internal targets with 422', async () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ url: 'ftp://example.com/x' }, 'validation_failed'],
      [{ url: 'http://example.com/hook' }, 'validation_failed'],
      [{ url: 'https://example.com/hook', rateLimitPerSecond: 0 }, 'validation_failed'],
      [{ url: 'https://example.com/hook', rateLimitPerSecond: 1001 }, 'validation_failed'],
      [{ url: 'https://example.com/hook', maxInFlight: 65 }, 'validation_failed'],
      [{ url: 'https://example.com/hook', eventTypes: ['bad type'] }, 'validation_failed'],
      [{ url: 'https://10.0.0.1/hook' }, 'target_not_allowed'],
      [{ url: 'https://metadata/hook' }, 'target_not_allowed'],
    ];
    for (const [body, code] of bad) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants/acme/endpoints', { body });
      expect([res.status, res.body.error?.code, JSON.stringify(body)]).toEqual([
        code === 'validation_failed' ? 400 : 422,
        code,
        JSON.stringify(body),
      ]);
    }
    const filter = await t.request<ErrorBody>('POST', '/v1/tenants/acme/endpoints', {
      body: { url: 'https://example.com/hook', filter: { $and: [{ 'data.n': { $gt: 1 } }, { 'data.m': { $regex: 'x' } }] } },
    });
    expect(filter.status).toBe(400);
    expect(filter.body.error.code).toBe('validation_failed');
    expect(filter.body.error.message).toContain('filter.$and[1].data.m.$regex');
    const unknown = await t.request<ErrorBody>('GET', '/v1/tenants/acme/endpoints/not-a-uuid');
    expect(unknown.status).toBe(404);
  });

  it('holds ENDPOINTS_PER_TENANT, eventsTargetUrl included', async () => {
    await tenant('bounded', { eventsTargetUrl: target.url });
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await create('bounded', { url: `https://example.com/${i}`, disabled: true })).id);
    const over = await t.request<ErrorBody>('POST', '/v1/tenants/bounded/endpoints', { body: { url: 'https://example.com/x' } });
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe('endpoint_limit');
    expect((await t.request('DELETE', `/v1/tenants/bounded/endpoints/${made[0]}`)).status).toBe(204);
    await create('bounded', { url: 'https://example.com/again', disabled: true });
  });

  it('a first eventsTargetUrl counts too: refused while the tenant holds ENDPOINTS_PER_TENANT endpoints, and changes nothing', async () => {
    await tenant('bounded-later');
    const made: string[] = [];
    for (let i = 0; i < 4; i++) made.push((await create('bounded-later', { url: `https://example.com/${i}`, disabled: true })).id);
    const later = await t.request<ErrorBody>('PATCH', '/v1/tenants/bounded-later', {
      body: { eventsTargetUrl: target.url, name: 'renamed' },
    });
    expect(later.status).toBe(409);
    expect(later.body.error.code).toBe('endpoint_limit');
    const kept = await t.request<{ name: string; eventsTargetUrl: string | null }>('GET', '/v1/tenants/bounded-later');
    expect(kept.body).toMatchObject({ name: 'bounded-later', eventsTargetUrl: null });
    expect((await t.request<{ endpoints: unknown[] }>('GET', '/v1/tenants/bounded-later/endpoints')).body.endpoints).toHaveLength(4);
    // A change that sets no first target is not held by the bound; one free place lets the target in.
    expect((await t.request('PATCH', '/v1/tenants/bounded-later', { body: { name: 'renamed' } })).status).toBe(200);
    expect((await t.request('DELETE', `/v1/tenants/bounded-later/endpoints/${made[0]}`)).status).toBe(204);
    const set = await t.request<{ eventsTargetUrl: string | null }>('PATCH', '/v1/tenants/bounded-later', {
      body: { eventsTargetUrl: target.url },
    });
    expect(set.status).toBe(200);
    expect(set.body.eventsTargetUrl).toBe(target.url);
    // Setting it again (the way a tenant says it is back after a 410) is no new endpoint.
    expect((await t.request('PATCH', '/v1/tenants/bounded-later', { body: { eventsTargetUrl: target.url } })).status).toBe(200);
    const over = await t.request<ErrorBody>('POST', '/v1/tenants/bounded-later/endpoints', { body: { url: 'https://example.com/x' } });
    expect(over.body.error.code).toBe('endpoint_limit');
  });

  it('tests a filter against an event as delivered', async () => {
    await tenant('filters');
    const ep = await create('filters', {
      url: 'https://example.com/f',
      eventTypes: ['workflow_step_updated', 'record.*'],
      filter: {
        $or: [{ 'data.transition': { $in: ['approved', 'rejected'] } }, { 'data.amount': { $gte: 100 } }],
        'data.test': { $neq: true },
      },
      disabled: true,
    });
    const probe = async (event: Record<string, unknown>) =>
      (await t.request<{ matches: boolean }>('POST', `/v1/tenants/filters/endpoints/${ep.id}/test-filter`, { body: { event } })).body
        .matches;
    const ts = '2026-11-23T00:00:00.000Z';
    expect(await probe({ type: 'workflow_step_updated', timestamp: ts, data: { transition: 'approved' } })).toBe(true);
    expect(await probe({ type: 'record.changed', timestamp: ts, data: { amount: 150 } })).toBe(true);
    expect(await probe({ type: 'record.changed', timestamp: ts, data: { amount: 50 } })).toBe(false);
    expect(await probe({ type: 'workflow_step_updated', timestamp: ts, data: { transition: 'approved', test: true } })).toBe(false);
    expect(await probe({ type: 'connection.created', timestamp: ts, data: { transition: 'approved' } })).toBe(false);
    const bad = await t.request<ErrorBody>('POST', `/v1/tenants/filters/endpoints/${ep.id}/test-filter`, { body: {} });
    expect(bad.status).toBe(400);
  });

  it('delivers each event to the endpoints whose types and filter take it, signed with each one’s secret, one webhook-id per event and endpoint', async () => {
    const all = await sink();
    const records = await sink();
    const approved = await sink();
    const fanSecret = await tenant('fan', { eventsTargetUrl: target.url });
    const a = await create('fan', { url: all.url });
    const r = await create('fan', { url: records.url, eventTypes: ['record.*'] });
    const f = await create('fan', { url: approved.url, filter: { 'data.transition': 'approved' } });
    // The first two fail once: the retry carries the same webhook-id.
    all.respond = (n) => (n === 0 ? 503 : 200);
    await emit('fan', 'record.changed', { transition: 'approved', n: 1 });
    await emit('fan', 'connection.created', { transition: 'pending', n: 2 });
    await waitUntil(
      'the deliveries',
      () => all.accepted().length === 2 && records.accepted().length === 1 && approved.accepted().length === 1,
    );
    await waitUntil('the first endpoint', () => target.received.filter((d) => (d.body.data as { n?: number }).n !== undefined).length >= 2);
    expect(records.received.map((d) => d.body.type)).toEqual(['record.changed']);
    expect(approved.received.map((d) => (d.body.data as { n: number }).n)).toEqual([1]);
    for (const [s, ep] of [
      [all, a],
      [records, r],
      [approved, f],
    ] as const)
      for (const d of s.received) {
        expect(verifySignature(ep.secret, d.headers, d.raw)).toBe(true);
        expect(verifySignature(fanSecret, d.headers, d.raw)).toBe(false);
      }
    const ids = new Set(all.received.filter((d) => (d.body.data as { n: number }).n === 1).map((d) => d.headers['webhook-id']));
    expect(all.received.filter((d) => (d.body.data as { n: number }).n === 1)).toHaveLength(2);
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    expect(id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(records.received[0].headers['webhook-id']).not.toBe(id);
    const first = target.received.find((d) => (d.body.data as { n?: number }).n === 1)!;
    expect(verifySignature(fanSecret, first.headers, first.raw)).toBe(true);
    expect(first.headers['webhook-id']).toMatch(/^[0-9a-f-]{36}$/);
    // The sink has answered; the attempts are recorded a moment later.
    const health = await waitUntil('the attempts recorded', async () => {
      const h = (await get('fan', a.id)).health;
      return h.pending === 0 && h.state === 'healthy' && h.successRate24h !== null && h.successRate24h > 0.6 ? h : null;
    });
    expect(health.successRate24h).toBeCloseTo(2 / 3, 2);
    expect(typeof health.p99Ms24h).toBe('number');
  });

  it('rotates a secret with overlap: both signatures during it', async () => {
    const s = await sink();
    await tenant('rotate');
    const ep = await create('rotate', { url: s.url });
    const res = await t.request<{ secret: string }>('POST', `/v1/tenants/rotate/endpoints/${ep.id}/secret`, {
      body: { overlapSeconds: 600 },
    });
    expect(res.status).toBe(200);
    expect(res.body.secret).toMatch(/^whsec_/);
    await emit('rotate', 'record.changed', { n: 1 });
    const [d] = await waitUntil('the delivery', () => (s.accepted().length > 0 ? s.accepted() : null));
    expect(String(d.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifySignature(res.body.secret, d.headers, d.raw)).toBe(true);
    expect(verifySignature(ep.secret, d.headers, d.raw)).toBe(true);
    const first = await t.request<ErrorBody>('POST', `/v1/tenants/rotate/endpoints/${FIRST}/secret`, { body: {} });
    expect(first.status).toBe(404);
  });

  it('honours Retry-After on 429: no attempt to the endpoint before it', async () => {
    const s = await sink();
    await tenant('slowdown');
    const ep = await create('slowdown', { url: s.url });
    s.respond = (n) => (n === 0 ? 429 : 200);
    s.respondHeaders = (n): Record<string, string> => (n === 0 ? { 'retry-after': '2' } : {});
    const arrived: number[] = [];
    s.wait = () => {
      arrived.push(Date.now());
      return null;
    };
    await emit('slowdown', 'record.changed', { n: 1 });
    await waitUntil('the retry', () => s.accepted().length === 1);
    expect(arrived).toHaveLength(2);
    expect(arrived[1] - arrived[0]).toBeGreaterThanOrEqual(1900);
    const row = await t.db.query<{ not_before: Date | null }>('SELECT not_before FROM event_endpoints WHERE id = $1', [ep.id]);
    expect(row.rows[0].not_before).not.toBeNull();
  });

  it('disables an endpoint that answers 410, tells the others (event and audit row), keeps what it missed, and redelivers it once', async () => {
    const dead = await sink();
    const watcher = await sink();
    await tenant('gone');
    const ep = await create('gone', { url: dead.url, eventTypes: ['record.*'] });
    await create('gone', { url: watcher.url, eventTypes: ['endpoint.*'] });
    dead.respond = () => 410;
    await emit('gone', 'record.changed', { n: 1 });
    const [note] = await waitUntil('endpoint.disabled', () =>
      ofType(watcher, 'endpoint.disabled').length ? ofType(watcher, 'endpoint.disabled') : null,
    );
    expect(note.body.data).toMatchObject({ endpointId: ep.id, reason: 'gone' });
    const disabled = await get('gone', ep.id);
    expect(disabled.disabled).toBe(true);
    expect(disabled.health).toMatchObject({ state: 'disabled', disabledReason: 'gone' });
    const audit = await t.db.query<{ action: string; actor_kind: string }>(
      `SELECT action, actor_kind FROM audit_log WHERE tenant_id = 'gone' AND action = 'endpoint.disabled'`,
    );
    expect(audit.rows).toEqual([{ action: 'endpoint.disabled', actor_kind: 'service' }]);
    // Missed while disabled: kept, sent nothing.
    await emit('gone', 'record.changed', { n: 2 });
    await emit('gone', 'record.changed', { n: 3 });
    await waitUntil('the missed deliveries', async () => {
      const r = await t.db.query(`SELECT 1 FROM endpoint_deliveries WHERE endpoint_id = $1 AND state = 'missed'`, [ep.id]);
      return r.rowCount === 2;
    });
    expect(dead.received).toHaveLength(1);
    const refused = await t.request<ErrorBody>('POST', `/v1/tenants/gone/endpoints/${ep.id}/redeliver`, {
      body: { since: '2020-01-01T00:00:00Z', state: 'missed' },
    });
    expect(refused.status).toBe(409);
    dead.respond = () => 200;
    expect((await t.request('PATCH', `/v1/tenants/gone/endpoints/${ep.id}`, { body: { disabled: false } })).status).toBe(200);
    const since = '2020-01-01T00:00:00Z';
    const [one, two] = await Promise.all([
      t.request<{ queued: number }>('POST', `/v1/tenants/gone/endpoints/${ep.id}/redeliver`, { body: { since, state: 'missed' } }),
      t.request<{ queued: number }>('POST', `/v1/tenants/gone/endpoints/${ep.id}/redeliver`, { body: { since, state: 'missed' } }),
    ]);
    expect([one.status, two.status]).toEqual([202, 202]);
    expect(one.body.queued + two.body.queued).toBe(2);
    await waitUntil('the missed events', () => dead.accepted().length === 2);
    await waitUntil('endpoint.recovered', () => ofType(watcher, 'endpoint.recovered').length === 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(
      dead
        .accepted()
        .map((d) => (d.body.data as { n: number }).n)
        .sort(),
    ).toEqual([2, 3]);
    expect(new Set(dead.accepted().map((d) => d.headers['webhook-id'])).size).toBe(2);
    const again = await t.request<{ queued: number }>('POST', `/v1/tenants/gone/endpoints/${ep.id}/redeliver`, {
      body: { since, state: 'missed' },
    });
    expect(again.body.queued).toBe(0);
    // The failed one (the 410) under its own webhook-id again.
    const failed = await t.request<{ queued: number }>('POST', `/v1/tenants/gone/endpoints/${ep.id}/redeliver`, { body: { since } });
    expect(failed.body.queued).toBe(1);
    await waitUntil('the failed event', () => dead.accepted().length === 3);
    const n1 = dead.received.filter((d) => (d.body.data as { n: number }).n === 1);
    expect(new Set(n1.map((d) => d.headers['webhook-id'])).size).toBe(1);
    expect(ofType(watcher, 'endpoint.recovered')[0].body.data).toMatchObject({ endpointId: ep.id });
  });

  it('disables an endpoint that failed for ENDPOINT_DISABLE_AFTER over at least 10 events; the clock is in the database', async () => {
    const failing = await sink();
    const watcher = await sink();
    await tenant('failing');
    const ep = await create('failing', { url: failing.url, eventTypes: ['record.*'], maxInFlight: 16 });
    await create('failing', { url: watcher.url, eventTypes: ['endpoint.*'] });
    failing.respond = () => 500;
    for (let i = 0; i < 12; i++) await emit('failing', 'record.changed', { n: i });
    const started = await waitUntil('the failure clock', async () => (await get('failing', ep.id)).health.failingSince);
    const warned = await waitUntil(
      'endpoint.failing',
      () => (ofType(watcher, 'endpoint.failing').length ? ofType(watcher, 'endpoint.failing') : null),
      20_000,
    );
    expect(warned[0].body.data).toMatchObject({ endpointId: ep.id, failingSince: started });
    // Keep it failing past ENDPOINT_DISABLE_AFTER: new events keep attempts coming.
    const feeding = setInterval(() => void emit('failing', 'record.changed', { n: 99 }), 1000);
    try {
      await waitUntil('endpoint.disabled', () => ofType(watcher, 'endpoint.disabled').length === 1, 25_000);
    } finally {
      clearInterval(feeding);
    }
    const after = await get('failing', ep.id);
    expect(after.health).toMatchObject({ state: 'disabled', disabledReason: 'failing', failingSince: started });
    expect(ofType(watcher, 'endpoint.disabled')[0].body.data).toMatchObject({ endpointId: ep.id, reason: 'failing' });
    const row = await t.db.query<{ failing_events: number }>('SELECT failing_events FROM event_endpoints WHERE id = $1', [ep.id]);
    expect(row.rows[0].failing_events).toBeGreaterThanOrEqual(10);
    const audit = await t.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE tenant_id = 'failing' AND actor_kind = 'service' ORDER BY at`,
    );
    expect(audit.rows.map((r) => r.action)).toEqual(expect.arrayContaining(['endpoint.failing', 'endpoint.disabled']));
  }, 60_000);
  it('the first endpoint is eventsTargetUrl: changed, disabled, enabled and removed through the endpoint routes', async () => {
    const s = await sink();
    await tenant('first', { eventsTargetUrl: target.url });
    const changed = await t.request<Endpoint>('PATCH', `/v1/tenants/first/endpoints/${FIRST}`, {
      body: { url: s.url, eventTypes: ['record.changed'] },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ id: FIRST, url: s.url, eventTypes: ['record.changed'] });
    const tenantRow = await t.request<{ eventsTargetUrl: string; eventTypes: string[] }>('GET', '/v1/tenants/first');
    expect(tenantRow.body).toMatchObject({ eventsTargetUrl: s.url, eventTypes: ['record.changed'] });
    const refused = await t.request<ErrorBody>('PATCH', `/v1/tenants/first/endpoints/${FIRST}`, { body: { maxInFlight: 2 } });
    expect([refused.status, refused.body.error.code]).toEqual([400, 'validation_failed']);
    await emit('first', 'record.changed', { n: 1 });
    const [d] = await waitUntil('the first endpoint delivery', () => (s.accepted().length ? s.accepted() : null));
    const listed = await t.request<{ events: Array<{ id: string }> }>('GET', '/v1/tenants/first/events');
    expect(d.headers['webhook-id']).toBe(listed.body.events[0].id);
    const off = await t.request<Endpoint>('PATCH', `/v1/tenants/first/endpoints/${FIRST}`, { body: { disabled: true } });
    expect(off.body.disabled).toBe(true);
    expect(off.body.health.state).toBe('disabled');
    const on = await t.request<Endpoint>('PATCH', `/v1/tenants/first/endpoints/${FIRST}`, { body: { disabled: false } });
    expect(on.body.disabled).toBe(false);
    expect((await t.request('DELETE', `/v1/tenants/first/endpoints/${FIRST}`)).status).toBe(204);
    const list = await t.request<{ endpoints: Endpoint[] }>('GET', '/v1/tenants/first/endpoints');
    expect(list.body.endpoints).toEqual([]);
    expect((await t.request<{ eventsTargetUrl: string | null }>('GET', '/v1/tenants/first')).body.eventsTargetUrl).toBeNull();
  });

  it('a 410 from eventsTargetUrl is announced to the added endpoints and audited', async () => {
    const gone = await sink();
    const watcher = await sink();
    gone.respond = () => 410;
    await tenant('firstgone', { eventsTargetUrl: gone.url });
    await create('firstgone', { url: watcher.url, eventTypes: ['endpoint.*'] });
    await emit('firstgone', 'record.changed', { n: 1 });
    const [note] = await waitUntil('endpoint.disabled', () =>
      ofType(watcher, 'endpoint.disabled').length ? ofType(watcher, 'endpoint.disabled') : null,
    );
    expect(note.body.data).toMatchObject({ endpointId: FIRST, reason: 'gone' });
    expect((await get('firstgone', FIRST)).health).toMatchObject({ state: 'disabled', disabledReason: 'gone' });
    const audit = await t.db.query<{ target: string }>(
      `SELECT target FROM audit_log WHERE tenant_id = 'firstgone' AND action = 'endpoint.disabled'`,
    );
    expect(audit.rows).toEqual([{ target: `endpoints/${FIRST}` }]);
    expect(gone.received).toHaveLength(1);
  });

  it('a 410 from eventsTargetUrl is disabled and announced in one transaction: a failed announcement undoes the disable, and the next attempt does both', async () => {
    const gone = await sink();
    const watcher = await sink();
    gone.respond = () => 410;
    await tenant('firstfault', { eventsTargetUrl: gone.url });
    await create('firstfault', { url: watcher.url, eventTypes: ['endpoint.*'] });
    // A fault of the database's own making: the announcement's audit row is refused (after its event row was
    // written in the same transaction). A sequence is not transactional: it counts the refusals.
    await t.db.query(`CREATE SEQUENCE firstfault_refusals`);
    await t.db.query(
      `CREATE FUNCTION firstfault_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('firstfault_refusals'); RAISE EXCEPTION 'refused by the test'; END $$`,
    );
    await t.db.query(
      `CREATE TRIGGER firstfault_refuse BEFORE INSERT ON audit_log FOR EACH ROW WHEN (NEW.tenant_id = 'firstfault' AND NEW.action = 'endpoint.disabled') EXECUTE FUNCTION firstfault_refuse()`,
    );
    const refusals = async () =>
      (await t.db.query<{ n: string }>(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM firstfault_refusals`)).rows[0].n;
    const stored = async () =>
      (
        await t.db.query<{ disabled: boolean; events: number; audits: number }>(
          `SELECT (SELECT events_target_disabled FROM tenants WHERE id = 'firstfault') AS disabled,
                  (SELECT count(*)::int FROM events WHERE tenant_id = 'firstfault' AND type = 'endpoint.disabled') AS events,
                  (SELECT count(*)::int FROM audit_log WHERE tenant_id = 'firstfault' AND action = 'endpoint.disabled') AS audits`,
        )
      ).rows[0];
    try {
      await emit('firstfault', 'record.changed', { n: 1 });
      await waitUntil('the refused announcement', async () => (await refusals()) !== '0');
      expect(gone.received).toHaveLength(1);
      expect(await stored()).toEqual({ disabled: false, events: 0, audits: 0 });
    } finally {
      await t.db.query(`DROP TRIGGER firstfault_refuse ON audit_log`);
      await t.db.query(`DROP FUNCTION firstfault_refuse`);
    }
    // The attempt's lease ends, the event is attempted again, meets the 410 again, and this time both commit.
    await waitUntil('endpoint.disabled', () => ofType(watcher, 'endpoint.disabled').length > 0, 30_000);
    expect(await stored()).toEqual({ disabled: true, events: 1, audits: 1 });
    expect(gone.received).toHaveLength(2);
    expect(await refusals()).toBe('1');
    expect(ofType(watcher, 'endpoint.disabled')).toHaveLength(1);
  });

  it('keeps the failure clock across a restart', async () => {
    const failing = await sink();
    failing.respond = () => 500;
    await tenant('restart');
    const ep = await create('restart', { url: failing.url });
    await emit('restart', 'record.changed', { n: 1 });
    const since = await waitUntil('the failure clock', async () => (await get('restart', ep.id)).health.failingSince);
    const old = t;
    t = await startSecondInstance(old, CLOCK_ENV);
    await old.close();
    await emit('restart', 'record.changed', { n: 2 });
    // The second event's first failure, recorded by the new instance, counts it: the clock went on from the database.
    await waitUntil('the second failed event counted', async () => {
      const r = await t.db.query<{ failing_events: number }>('SELECT failing_events FROM event_endpoints WHERE id = $1', [ep.id]);
      return r.rows[0].failing_events === 2;
    });
    const after = await get('restart', ep.id);
    expect(after.health).toMatchObject({ state: 'failing', failingSince: since });
  }, 30_000);
});
