import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CwsApiError,
  CwsConnectClient,
  EventVerificationError,
  FIRST_ENDPOINT_ID,
  verifyEvent,
  type CreatedEndpoint,
  type Endpoint,
} from '@cws-connect/node-client';
import { EventsRepository } from '../src/events/events.repository.js';
import { newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

/** @cws-connect/node-client's event endpoint methods (API.md section 13) against a started service and a partner's sinks. */
describe('the node client: event endpoints', () => {
  let t: TestApp;
  let target: WebhookSink;
  let sink: WebhookSink;
  let client: CwsConnectClient;

  const emit = (type: string, data: Record<string, unknown>) =>
    t.app.get(EventsRepository).record({ tenantId: 'ep-client', source: 'service', type, payload: data });

  beforeAll(async () => {
    t = await startTestApp({
      env: { EVENTS_RELAY_INTERVAL_MS: '100', EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RETRY_BASE_MS: '100', EVENTS_RETRY_MAX_MS: '300' },
    });
    target = await WebhookSink.start();
    sink = await WebhookSink.start();
    await newTenant(t, 'ep-client', { eventsTargetUrl: target.url });
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/ep-client/api-keys', { body: { name: 'client' } });
    client = new CwsConnectClient({ baseUrl: t.url, apiKey: key.body.key, tenantId: 'ep-client' });
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
    await target?.close();
  });

  let ep: CreatedEndpoint;

  it('creates an endpoint (its secret shown once); a delivery to it verifies with verifyEvent and that secret', async () => {
    ep = await client.createEndpoint({ url: sink.url, description: 'pipeline', eventTypes: ['connection.*'] });
    expect(ep.secret).toMatch(/^whsec_/);
    expect(ep).toMatchObject({ url: sink.url, description: 'pipeline', eventTypes: ['connection.*'], maxInFlight: 4, disabled: false });
    const read: Endpoint = await client.getEndpoint(ep.id);
    expect(JSON.stringify(read)).not.toContain(ep.secret);
    expect(read.health.state).toBe('healthy');

    await emit('connection.created', { type: 'connection.created', connectionId: 'c-1', kind: 'user', userId: 'u-1' });
    await emit('workflow_step_updated', { transition: 'approved' });
    const [d] = await waitUntil('the delivery', () => (sink.accepted().length >= 1 ? sink.accepted() : null));
    const event = verifyEvent(d.headers, d.raw, ep.secret);
    expect(event).toMatchObject({ source: 'service', type: 'connection.created', data: { connectionId: 'c-1' } });
    expect(event.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(() => verifyEvent(d.headers, d.raw, `whsec_${Buffer.alloc(24, 7).toString('base64')}`)).toThrow(EventVerificationError);
    // eventsTargetUrl took both events; the endpoint only the type it asked for.
    await waitUntil('the first endpoint', () => target.accepted().length === 2);
    expect(sink.received.map((r) => r.body.type)).toEqual(['connection.created']);
  });

  it('rotates the secret: during the overlap a delivery verifies with the old secret and with the new one', async () => {
    const fresh = await client.rotateEndpointSecret(ep.id, { overlapSeconds: 3600 });
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(ep.secret);
    await emit('connection.deleted', { type: 'connection.deleted', connectionId: 'c-1', kind: 'user', userId: 'u-1' });
    const d = await waitUntil('the delivery after rotation', () => sink.accepted().find((r) => r.body.type === 'connection.deleted'));
    expect(String(d.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifyEvent(d.headers, d.raw, fresh).type).toBe('connection.deleted');
    expect(verifyEvent(d.headers, d.raw, ep.secret).type).toBe('connection.deleted');
    await expect(client.rotateEndpointSecret(FIRST_ENDPOINT_ID)).rejects.toMatchObject({ status: 409, code: 'conflict' });
  });

  it('lists the endpoints with their health, eventsTargetUrl first, never a secret; the operator key reads them too', async () => {
    const listed = await client.listEndpoints();
    expect(listed.map((e) => e.id)).toEqual([FIRST_ENDPOINT_ID, ep.id]);
    const mine = listed[1];
    expect(mine.health).toMatchObject({ state: 'healthy', successRate24h: 1, pending: 0, oldestPendingSeconds: 0 });
    expect(JSON.stringify(listed)).not.toMatch(/whsec_|"secret"/);
    const operator = new CwsConnectClient({ baseUrl: t.url, apiKey: t.operatorKey, tenantId: 'ep-client' });
    expect((await operator.listEndpoints()).map((e) => e.id)).toEqual([FIRST_ENDPOINT_ID, ep.id]);
  });

  it('sets and tests a filter, refuses a bad one with its path named', async () => {
    await client.updateEndpoint(ep.id, { filter: { 'data.kind': 'admin' } });
    const ts = '2026-11-23T00:00:00.000Z';
    expect(await client.testEndpointFilter(ep.id, { type: 'connection.created', timestamp: ts, data: { kind: 'admin' } })).toBe(true);
    expect(await client.testEndpointFilter(ep.id, { type: 'connection.created', timestamp: ts, data: { kind: 'user' } })).toBe(false);
    expect(await client.testEndpointFilter(ep.id, { type: 'record.changed', timestamp: ts, data: { kind: 'admin' } })).toBe(false);
    const bad = await client.updateEndpoint(ep.id, { filter: { 'data.kind': { $regex: 'a' } } }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(CwsApiError);
    expect(bad).toMatchObject({ status: 400, code: 'validation_failed', requestId: expect.any(String) });
    expect((bad as CwsApiError).message).toContain('data.kind');
  });

  it('disables and re-enables an endpoint, redelivers, and deletes it', async () => {
    const off = await client.updateEndpoint(ep.id, { disabled: true });
    expect(off.disabled).toBe(true);
    expect((await client.getEndpoint(ep.id)).health).toMatchObject({ state: 'disabled', disabledReason: 'request' });
    await expect(client.redeliverEndpoint(ep.id, { since: '2020-01-01T00:00:00Z' })).rejects.toMatchObject({ status: 409 });

    const on = await client.updateEndpoint(ep.id, { disabled: false, filter: null });
    expect(on).toMatchObject({ disabled: false, filter: null, health: { state: 'healthy' } });
    const before = sink.accepted().length;
    const queued = await client.redeliverEndpoint(ep.id, { since: '2020-01-01T00:00:00Z', state: 'any' });
    expect(queued).toBe(2);
    await waitUntil('the redeliveries', () => sink.accepted().length === before + 2);
    const ids = sink.accepted().map((r) => String(r.headers['webhook-id']));
    expect(new Set(ids).size).toBe(2);

    await client.deleteEndpoint(ep.id);
    const gone = await client.getEndpoint(ep.id).catch((e: unknown) => e);
    expect(gone).toMatchObject({ name: 'CwsApiError', status: 404, code: 'endpoint_not_found' });
    expect((await client.listEndpoints()).map((e) => e.id)).toEqual([FIRST_ENDPOINT_ID]);
  });

  it("labels the service's own record, sync and endpoint events `service`, typed by their type", async () => {
    const own = await WebhookSink.start();
    try {
      const mine = await client.createEndpoint({ url: own.url, eventTypes: ['record.*', 'sync.*', 'endpoint.*', 'workflow_step_updated'] });
      await emit('record.changed', { object: 'workflow', id: 'wf-1', userId: 'u-1', action: 'updated', version: 2, cursor: 'c1' });
      await emit('sync.ready', { userId: 'u-1', records: 3, cursor: 'c2' });
      await emit('endpoint.disabled', { endpointId: FIRST_ENDPOINT_ID, description: null, reason: 'gone' });
      await t.app.get(EventsRepository).record({ tenantId: 'ep-client', source: 'upstream', type: 'workflow_step_updated', payload: {} });
      await waitUntil('four deliveries', () => own.accepted().length >= 4);
      const events = own.accepted().map((d) => verifyEvent(d.headers, d.raw, mine.secret));
      const byType = new Map(events.map((e) => [e.type, e]));
      expect(byType.get('record.changed')).toMatchObject({ source: 'service', data: { id: 'wf-1', action: 'updated', version: 2 } });
      expect(byType.get('sync.ready')).toMatchObject({ source: 'service', data: { records: 3 } });
      expect(byType.get('endpoint.disabled')).toMatchObject({ source: 'service', data: { reason: 'gone' } });
      expect(byType.get('workflow_step_updated')?.source).toBe('upstream');
      const changed = events.find((e) => e.source === 'service' && e.type === 'record.changed');
      // Typed by its type: the compiler knows `data` is a RecordChangedData here.
      if (changed?.source === 'service' && changed.type === 'record.changed') expect(changed.data.cursor).toBe('c1');
      else throw new Error('record.changed not verified as the service’s');
      await client.deleteEndpoint(mine.id);
    } finally {
      await own.close();
    }
  });
});
