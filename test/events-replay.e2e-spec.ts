import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { EventDeliveryService } from '../src/events/event-delivery.service.js';
import { EventsRepository } from '../src/events/events.repository.js';
import { expectDocumented } from './support/openapi.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink, type SinkDelivery } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface Attempt {
  at: string;
  status: number | null;
  durationMs: number;
  error: string | null;
}
interface EventItem {
  id: string;
  type: string;
  delivery: { state: string; attempts: number; lastError: string | null };
}
interface Tenant {
  eventsTargetUrl: string | null;
  eventsTargetDisabled: boolean;
  eventTypes: string[] | null;
}

describe('events you can get back: attempts, redelivery, Retry-After, 410 Gone, secret overlap, type filter (API.md section 8)', () => {
  let t: TestApp;
  const sinks: WebhookSink[] = [];

  beforeAll(async () => {
    t = await startTestApp({
      sandbox: true,
      env: {
        EVENTS_RETRY_BASE_MS: '100',
        EVENTS_RETRY_MAX_MS: '200',
        EVENTS_RETRY_SPAN_MS: '60000',
        EVENTS_POLL_INTERVAL_MS: '500',
        EVENTS_RELAY_INTERVAL_MS: '100',
        EVENTS_ATTEMPT_TIMEOUT_MS: '2000',
        EVENTS_MAINTENANCE_SECONDS: '1',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    for (const s of sinks) await s.close();
  });

  /** A tenant whose events go to a sink of its own; answers the tenant's events secret. */
  async function tenantWithSink(id: string, over: Record<string, unknown> = {}): Promise<{ sink: WebhookSink; secret: string }> {
    const sink = await WebhookSink.start();
    sinks.push(sink);
    const res = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants', {
      body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], eventsTargetUrl: sink.url, ...over },
    });
    expect(res.status).toBe(201);
    return { sink, secret: res.body.eventsSecret };
  }

  /** Records an event the way the inbound receiver does, and hands it to delivery; answers its id. */
  async function emit(tenantId: string, type = 'workflow_step_updated'): Promise<string> {
    const marker = randomUUID();
    await t.app.get(EventsRepository).record({ tenantId, source: 'upstream', type, payload: { event: type, marker } });
    t.app.get(EventDeliveryService).kick();
    const row = await t.db.query<{ id: string }>(`SELECT id FROM events WHERE payload->>'marker' = $1`, [marker]);
    return row.rows[0].id;
  }

  const eventOf = async (tenantId: string, id: string): Promise<EventItem | undefined> => {
    const page = await t.request<{ events: EventItem[] }>('GET', `/v1/tenants/${tenantId}/events?limit=500`);
    return page.body.events.find((e) => e.id === id);
  };
  const stateOf = async (tenantId: string, id: string) => (await eventOf(tenantId, id))?.delivery.state;
  const attemptsOf = async (tenantId: string, id: string) =>
    t.request<{ attempts: Attempt[] }>('GET', `/v1/tenants/${tenantId}/events/${id}/attempts`);
  const deliveriesOf = (sink: WebhookSink, id: string): SinkDelivery[] => sink.received.filter((d) => d.headers['webhook-id'] === id);

  it('keeps every attempt (status, duration, error kind), never a body or a URL', async () => {
    const { sink } = await tenantWithSink('att');
    sink.respond = (n) => (n < 2 ? 500 : 200);
    const id = await emit('att');
    await waitUntil('delivered', async () => (await stateOf('att', id)) === 'delivered');
    const res = await attemptsOf('att', id);
    expect(res.status).toBe(200);
    expect(res.body.attempts.map((a) => [a.status, a.error])).toEqual([
      [500, 'http_500'],
      [500, 'http_500'],
      [200, null],
    ]);
    for (const a of res.body.attempts) {
      expect(Object.keys(a).sort()).toEqual(['at', 'durationMs', 'error', 'status']);
      expect(Number.isInteger(a.durationMs) && a.durationMs >= 0).toBe(true);
    }
    const times = res.body.attempts.map((a) => Date.parse(a.at));
    expect([...times].sort((x, y) => x - y)).toEqual(times);
    expect(res.text).not.toContain('127.0.0.1');
    expect(res.text).not.toContain('marker');
    expect((await eventOf('att', id))!.delivery).toMatchObject({ state: 'delivered', attempts: 3, lastError: null });
  });

  it('a target nobody listens on is a network error with no status', async () => {
    const { sink } = await tenantWithSink('net');
    await sink.close();
    const id = await emit('net');
    const res = await waitUntil('a failed attempt', async () => {
      const r = await attemptsOf('net', id);
      return r.body.attempts.length > 0 ? r.body.attempts : null;
    });
    expect(res[0]).toMatchObject({ status: null, error: 'network' });
    await t.request('PATCH', '/v1/tenants/net', { body: { eventsTargetUrl: null } });
  });

  it("attempts and redelivery of an unknown event, another tenant's event or a malformed id are 404", async () => {
    await tenantWithSink('own');
    const theirs = await emit('att');
    for (const path of [
      `/v1/tenants/own/events/${randomUUID()}/attempts`,
      `/v1/tenants/own/events/${theirs}/attempts`,
      '/v1/tenants/own/events/nope/attempts',
    ]) {
      const res = await t.request<ErrorBody>('GET', path);
      expect([path, res.status, res.body.error.code]).toEqual([path, 404, 'event_not_found']);
    }
    const post = await t.request<ErrorBody>('POST', `/v1/tenants/own/events/${theirs}/redeliver`);
    expect([post.status, post.body.error.code]).toEqual([404, 'event_not_found']);
    const tenant = await t.request<ErrorBody>('GET', `/v1/tenants/ghost/events/${theirs}/attempts`);
    expect([tenant.status, tenant.body.error.code]).toEqual([404, 'tenant_not_found']);
  });

  it('redelivers one event under the same webhook-id, with a new attempt in its log', async () => {
    const { sink, secret } = await tenantWithSink('one');
    const id = await emit('one');
    await waitUntil('first delivery', async () => (await stateOf('one', id)) === 'delivered');
    const res = await t.request<{ id: string }>('POST', `/v1/tenants/one/events/${id}/redeliver`);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id });
    await waitUntil('second delivery', () => deliveriesOf(sink, id).length === 2);
    const [first, second] = deliveriesOf(sink, id);
    expect(second.headers['webhook-id']).toBe(first.headers['webhook-id']);
    expect(second.raw).toBe(first.raw);
    expect(() => new Webhook(secret).verify(second.raw, second.headers as Record<string, string>)).not.toThrow();
    await waitUntil('delivered again', async () => (await stateOf('one', id)) === 'delivered');
    expect((await attemptsOf('one', id)).body.attempts).toHaveLength(2);
  });

  it('redelivers the dead events since T (state dead by default), and refuses bad input with nothing queued', async () => {
    const { sink } = await tenantWithSink('bulk', {});
    sink.respond = () => 500;
    const before = new Date(Date.now() - 1000).toISOString();
    const ids = [await emit('bulk'), await emit('bulk'), await emit('bulk')];
    await waitUntil('a failure on each', async () => {
      const r = await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM events WHERE id = ANY($1::uuid[]) AND delivery_attempts > 0`,
        [ids],
      );
      return r.rows[0].n === 3;
    });
    // Dead-letter them as the end of the retry span would (counting the attempt, so their queued retry is stale).
    await t.db.query(
      `UPDATE events SET delivery_state = 'dead', delivery_attempts = delivery_attempts + 1, next_attempt_at = NULL WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    await new Promise((r) => setTimeout(r, 300));
    sink.respond = () => 200;

    for (const body of [{}, { since: 'yesterday' }, { since: before, state: 'lost' }, { since: before, extra: 1 }, { since: 12 }]) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants/bulk/events/redeliver', { body });
      expect([JSON.stringify(body), res.status, res.body.error.code]).toEqual([JSON.stringify(body), 400, 'validation_failed']);
    }
    const later = await t.request<{ queued: number }>('POST', '/v1/tenants/bulk/events/redeliver', {
      body: { since: new Date(Date.now() + 60_000).toISOString() },
    });
    expect(later.body.queued).toBe(0);
    const delivered = await t.request<{ queued: number }>('POST', '/v1/tenants/bulk/events/redeliver', {
      body: { since: before, state: 'delivered' },
    });
    expect(delivered.body.queued).toBe(0);

    const res = await t.request<{ queued: number; remaining: number }>('POST', '/v1/tenants/bulk/events/redeliver', {
      body: { since: before },
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ queued: 3, remaining: 0 });
    for (const id of ids) await waitUntil(`delivery of ${id}`, async () => (await stateOf('bulk', id)) === 'delivered');
    for (const id of ids) expect(deliveriesOf(sink, id).filter((d) => d.status === 200)).toHaveLength(1);
    // Delivered now: a second "dead" call finds nothing; "any" picks them again.
    expect(
      (await t.request<{ queued: number }>('POST', '/v1/tenants/bulk/events/redeliver', { body: { since: before } })).body.queued,
    ).toBe(0);
    expect(
      (await t.request<{ queued: number }>('POST', '/v1/tenants/bulk/events/redeliver', { body: { since: before, state: 'any' } })).body
        .queued,
    ).toBe(3);
  });

  it('one call queues at most 1,000 events; the rest are counted and queued by the next call', async () => {
    const { sink } = await tenantWithSink('flood');
    const since = new Date(Date.now() - 1000).toISOString();
    await t.db.query(
      `INSERT INTO events (id, tenant_id, source, type, payload, delivery_state, delivery_attempts, last_delivery_error)
       SELECT gen_random_uuid(), 'flood', 'upstream', 'workflow_step_updated', jsonb_build_object('n', g), 'dead', 1, 'http_500' FROM generate_series(1, 1100) g`,
    );
    const first = await t.request<{ queued: number; remaining: number }>('POST', '/v1/tenants/flood/events/redeliver', { body: { since } });
    expect(first.body).toEqual({ queued: 1000, remaining: 100 });
    const pending = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM events WHERE tenant_id = 'flood' AND delivery_state = 'pending'`,
    );
    expect(pending.rows[0].n).toBeLessThanOrEqual(1000);
    const second = await t.request<{ queued: number; remaining: number }>('POST', '/v1/tenants/flood/events/redeliver', {
      body: { since },
    });
    expect(second.body).toEqual({ queued: 100, remaining: 0 });
    await waitUntil('1,100 deliveries', () => new Set(sink.accepted().map((d) => d.headers['webhook-id'])).size === 1100, 60_000, 200);
  });

  it('honours Retry-After on 429 and 503', async () => {
    const { sink } = await tenantWithSink('ra');
    sink.respond = (n) => (n === 0 ? 429 : n === 1 ? 503 : 200);
    sink.respondHeaders = (n): Record<string, string> =>
      n === 0 ? { 'retry-after': '2' } : n === 1 ? { 'retry-after': new Date(Date.now() + 2000).toUTCString() } : {};
    const id = await emit('ra');
    await waitUntil('delivered after two refusals', async () => (await stateOf('ra', id)) === 'delivered', 20_000);
    const attempts = (await attemptsOf('ra', id)).body.attempts;
    expect(attempts.map((a) => a.error)).toEqual(['http_429', 'http_503', null]);
    // The backoff alone is 100-200 ms here: each retry waited for what the target asked (an HTTP date has whole seconds).
    const gaps = [Date.parse(attempts[1].at) - Date.parse(attempts[0].at), Date.parse(attempts[2].at) - Date.parse(attempts[1].at)];
    expect(gaps[0]).toBeGreaterThanOrEqual(1900);
    expect(gaps[1]).toBeGreaterThanOrEqual(900);
  });

  it('410 Gone disables the target until eventsTargetUrl is set again; nothing is delivered meanwhile', async () => {
    const { sink } = await tenantWithSink('gone');
    sink.respond = (n) => (n === 0 ? 410 : 200);
    const first = await emit('gone');
    await waitUntil('dead after 410', async () => (await stateOf('gone', first)) === 'dead');
    expect((await eventOf('gone', first))!.delivery.lastError).toBe('http_410');
    const tenant = await t.request<Tenant>('GET', '/v1/tenants/gone');
    expect(tenant.body).toMatchObject({ eventsTargetUrl: sink.url, eventsTargetDisabled: true });

    const second = await emit('gone');
    expect(await stateOf('gone', second)).toBe('no_target');
    const refused = await t.request<ErrorBody>('POST', `/v1/tenants/gone/events/${first}/redeliver`);
    expect([refused.status, refused.body.error.code]).toEqual([409, 'conflict']);
    await new Promise((r) => setTimeout(r, 500));
    expect(sink.received).toHaveLength(1);

    const patched = await t.request<Tenant>('PATCH', '/v1/tenants/gone', { body: { eventsTargetUrl: sink.url } });
    expect(patched.body.eventsTargetDisabled).toBe(false);
    const res = await t.request<{ queued: number }>('POST', '/v1/tenants/gone/events/redeliver', {
      body: { since: new Date(Date.now() - 60_000).toISOString(), state: 'any' },
    });
    expect(res.body.queued).toBe(2);
    await waitUntil(
      'both delivered',
      async () => (await stateOf('gone', first)) === 'delivered' && (await stateOf('gone', second)) === 'delivered',
    );
  });

  it('a rotation with an overlap signs with both secrets, each verified by the standardwebhooks library; after it, only the new one', async () => {
    const { sink, secret: oldSecret } = await tenantWithSink('rot');
    const rotated = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/rot/events-secret', { body: { overlapSeconds: 600 } });
    expect(rotated.status).toBe(201);
    const newSecret = rotated.body.eventsSecret;
    const id = await emit('rot');
    const d = await waitUntil('a delivery', () => deliveriesOf(sink, id)[0]);
    const headers = d.headers as Record<string, string>;
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(newSecret).verify(d.raw, headers)).toMatchObject({ type: 'workflow_step_updated' });
    expect(new Webhook(oldSecret).verify(d.raw, headers)).toMatchObject({ type: 'workflow_step_updated' });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(d.raw, headers)).toThrow();

    // A rotation without an overlap: the secret it replaces stops signing at once, and so does the older one.
    const again = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/rot/events-secret', { body: {} });
    const third = await emit('rot');
    const d3 = await waitUntil('a delivery', () => deliveriesOf(sink, third)[0]);
    const h3 = d3.headers as Record<string, string>;
    expect(h3['webhook-signature'].split(' ')).toHaveLength(1);
    expect(() => new Webhook(again.body.eventsSecret).verify(d3.raw, h3)).not.toThrow();
    expect(() => new Webhook(newSecret).verify(d3.raw, h3)).toThrow();
    expect(() => new Webhook(oldSecret).verify(d3.raw, h3)).toThrow();

    // An overlap ends by itself.
    await t.request('POST', '/v1/tenants/rot/events-secret', { body: { overlapSeconds: 1 } });
    await new Promise((r) => setTimeout(r, 1100));
    const fourth = await emit('rot');
    const d4 = await waitUntil('a delivery', () => deliveriesOf(sink, fourth)[0]);
    expect(String(d4.headers['webhook-signature']).split(' ')).toHaveLength(1);

    for (const body of [{ overlapSeconds: -1 }, { overlapSeconds: 604801 }, { overlapSeconds: 'long' }, { overlapSeconds: 1.5 }]) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants/rot/events-secret', { body });
      expect([JSON.stringify(body), res.status]).toEqual([JSON.stringify(body), 400]);
    }
    expect(t.logs.join('')).not.toContain(newSecret.slice(6));
    expect(t.logs.join('')).not.toContain(oldSecret.slice(6));
  });

  it('eventTypes: other types are stored and listed as filtered, never delivered; null delivers everything again', async () => {
    const { sink } = await tenantWithSink('types', { eventTypes: ['connection.created'] });
    expect((await t.request<Tenant>('GET', '/v1/tenants/types')).body.eventTypes).toEqual(['connection.created']);
    const skipped = await emit('types', 'workflow_step_updated');
    const wanted = await emit('types', 'connection.created');
    await waitUntil('the wanted one delivered', async () => (await stateOf('types', wanted)) === 'delivered');
    expect(await stateOf('types', skipped)).toBe('filtered');
    expect(deliveriesOf(sink, skipped)).toHaveLength(0);

    for (const eventTypes of [[], ['a b'], [7], 'connection.created', ['x', 'x']]) {
      const res = await t.request<ErrorBody>('PATCH', '/v1/tenants/types', { body: { eventTypes } });
      expect([JSON.stringify(eventTypes), res.status]).toEqual([JSON.stringify(eventTypes), 400]);
    }
    expect((await t.request<Tenant>('GET', '/v1/tenants/types')).body.eventTypes).toEqual(['connection.created']);

    expect((await t.request<Tenant>('PATCH', '/v1/tenants/types', { body: { eventTypes: null } })).body.eventTypes).toBeNull();
    const now = await emit('types', 'workflow_step_updated');
    await waitUntil('delivered once unfiltered', async () => (await stateOf('types', now)) === 'delivered');
    // An explicit redelivery of a filtered event delivers it.
    expect((await t.request('POST', `/v1/tenants/types/events/${skipped}/redeliver`)).status).toBe(202);
    await waitUntil('the filtered one delivered on request', () => deliveriesOf(sink, skipped).length === 1);
  });

  it('a tenant key reaches its own events only', async () => {
    await tenantWithSink('keyed');
    const id = await emit('keyed');
    const key = (await t.request<{ key: string }>('POST', '/v1/tenants/keyed/api-keys', { body: {} })).body.key;
    expect((await t.request('GET', `/v1/tenants/keyed/events/${id}/attempts`, { key })).status).toBe(200);
    expect((await t.request('POST', `/v1/tenants/keyed/events/${id}/redeliver`, { key })).status).toBe(202);
    const other = await emit('att');
    expect((await t.request('GET', `/v1/tenants/att/events/${other}/attempts`, { key })).status).toBe(404);
    expect((await t.request('POST', '/v1/tenants/att/events/redeliver', { key, body: { since: new Date(0).toISOString() } })).status).toBe(
      404,
    );
  });

  it("the OpenAPI document describes each operation: summary, security, errors in the contract's shape", async () => {
    await expectDocumented(t, '/v1/tenants/{tenantId}/events', 'get', ['400', '401', '404']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/events/{eventId}/attempts', 'get', ['401', '404']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/events/{eventId}/redeliver', 'post', ['401', '404', '409']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/events/redeliver', 'post', ['400', '401', '404', '409']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/events-secret', 'post', ['400', '401', '403', '404']);
  });
});
