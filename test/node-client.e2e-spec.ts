import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CwsApiError,
  CwsConnectClient,
  EventVerificationError,
  verifyEvent,
  type Connection,
  type VerifiedEvent,
} from '@cws-connect/node-client';
import { signDelivery } from '../src/events/standard-webhooks.js';
import { authorizeAtSandbox, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { WebhookSink } from './support/webhook-sink.js';

/** @cws-connect/node-client against a started service, its sandbox, and a partner's events endpoint. */
describe('the node client against the service', () => {
  let t: TestApp;
  let sink: WebhookSink;
  let client: CwsConnectClient;
  let eventsSecret: string;

  /** The browser's part of the flow (the consent page), then the callback: what a person does. */
  const connect = async (userId: string, as: string) => {
    const session = await client.createConnectSession({ kind: 'user', userId, returnUrl: 'http://localhost:5173/done' });
    const callback = await authorizeAtSandbox(session.connectUrl, as, 'approve');
    const back = await fetch(callback.url, { redirect: 'manual', headers: { cookie: callback.cookie } });
    return new URL(back.headers.get('location')!).searchParams.get('connectionId')!;
  };

  beforeAll(async () => {
    t = await startTestApp({ env: { EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RELAY_INTERVAL_MS: '200' } });
    sink = await WebhookSink.start();
    await newTenant(t, 'client-co', { eventsTargetUrl: sink.url });
    eventsSecret = (await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/client-co/events-secret')).body.eventsSecret;
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/client-co/api-keys', { body: { name: 'client' } });
    client = new CwsConnectClient({ baseUrl: t.url, apiKey: key.body.key, tenantId: 'client-co' });
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  it('creates a connect session, and gets, lists, refreshes and deletes connections', async () => {
    const session = await client.createConnectSession({ kind: 'user', userId: 'c-nobody', returnUrl: 'http://localhost:5173/x' });
    expect(session.connectUrl).toMatch(new RegExp(`^${t.url}/connect/`));
    expect(Date.parse(session.expiresAt)).toBeGreaterThan(Date.now());

    const alice = await connect('c-alice', 'alice');
    const bob = await connect('c-bob', 'bob');
    const got: Connection = await client.getConnection(alice);
    expect(got).toMatchObject({ id: alice, userId: 'c-alice', kind: 'user', status: 'active', upstreamUser: { id: 'alice' } });
    expect(JSON.stringify(got)).not.toMatch(/token"\s*:\s*"/i);

    const listed: Connection[] = [];
    for await (const c of client.listConnections({ limit: 1 })) listed.push(c);
    expect(listed.map((c) => c.id).sort()).toEqual([alice, bob].sort());

    const refreshed = await client.refreshConnection(bob);
    expect(refreshed.lastRefreshedAt).not.toBeNull();

    await client.deleteConnection(bob);
    const gone = await client.getConnection(bob).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(CwsApiError);
    expect(gone).toMatchObject({ status: 404, code: 'connection_not_found', upstreamStatus: null, requestId: expect.any(String) });
  });

  it('mints, lists and revokes an agent session', async () => {
    const session = await client.createAgentSession({ userId: 'u-agent', tools: ['read'], label: 'typed' });
    expect(session.token).toMatch(/^cwsag_/);
    expect(session.mcpUrl).toBe(`${t.config.publicUrl}/mcp`);
    const page = await client.agentSessionsPage({ userId: 'u-agent' });
    expect(page.items.map((s) => [s.id, s.status])).toEqual([[session.id, 'active']]);
    await client.revokeAgentSession(session.id);
    expect((await client.agentSessionsPage({ userId: 'u-agent' })).items[0].status).toBe('revoked');
    await expect(client.revokeAgentSession('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({
      code: 'agent_session_not_found',
    });
  });

  it("refuses bad input with the service's own error code", async () => {
    const e = await client
      .createConnectSession({ kind: 'user', userId: 'x', returnUrl: 'https://elsewhere.example/' })
      .catch((err: unknown) => err);
    expect(e).toMatchObject({ name: 'CwsApiError', status: 400, code: 'validation_failed' });
  });

  it("makes the typed workflow calls with the acting user's token, and passes upstream refusals through as errors", async () => {
    await connect('c-carol', 'carol');
    await connect('c-dave', 'dave');
    const launched = await client.workflows.launch({ name: 'Client NDA', approvers: ['dave'] }, { userId: 'c-carol' });
    expect(launched.status).toBe(201);
    const wf = launched.data as { id: string; creator: { id: string } };
    expect(wf.creator.id).toBe('carol');

    const read = await client.workflows.get(wf.id, { userId: 'c-carol' });
    expect(read.data).toMatchObject({ id: wf.id });
    const list = await client.workflows.list({ userId: 'c-carol' });
    expect(JSON.stringify(list.data)).toContain(wf.id);
    const me = await client.me({ userId: 'c-dave' });
    expect(me.data).toMatchObject({ id: 'dave' });

    const approved = await client.workflows.approve(wf.id, { comment: 'fine' }, { userId: 'c-dave' });
    expect(approved.status).toBe(200);
    expect(t.sandbox!.records().at(-1)).toMatchObject({ method: 'PATCH', tokenUserId: 'dave' });

    const refused = await client.workflows.approve(wf.id, {}, { userId: 'c-carol' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ name: 'CwsApiError', upstreamStatus: 403, status: 403, code: 'upstream_error' });
    const notConnected = await client.workflows.list({ userId: 'c-stranger' }).catch((e: unknown) => e);
    expect(notConnected).toMatchObject({ status: 409, code: 'user_not_connected', upstreamStatus: null });
  });

  it('streams an upload from a Readable through the generic proxy and through the typed launch', async () => {
    await connect('c-streamer', 'bob');
    const boundary = `----cws${randomBytes(6).toString('hex')}`;
    const file = randomBytes(3 * 1024 * 1024);
    const parts = () =>
      Readable.from(
        (function* () {
          yield Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nStreamed contract\r\n`);
          yield Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="contract"; filename="c.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
          );
          for (let i = 0; i < file.length; i += 64 * 1024) yield file.subarray(i, i + 64 * 1024);
          yield Buffer.from(`\r\n--${boundary}--\r\n`);
        })(),
      );
    const contentType = `multipart/form-data; boundary=${boundary}`;

    const viaProxy = await client.proxy('POST', '/workflows', { userId: 'c-streamer', body: { body: parts(), contentType } });
    expect(viaProxy.status).toBe(201);
    expect(viaProxy.headers.get('x-upstream-status')).toBe('201');
    const stored = (await viaProxy.json()) as { documents: Array<{ name: string; size: number }> };
    expect(stored.documents).toEqual([expect.objectContaining({ size: file.length })]);

    const typed = await client.workflows.launch(
      { body: Readable.toWeb(parts()) as ReadableStream<Uint8Array>, contentType },
      { userId: 'c-streamer' },
    );
    expect(typed.data).toMatchObject({ documents: [expect.objectContaining({ size: file.length })] });
  });

  it('pages through the events, and verifies a delivery as a typed connection event', async () => {
    const id = await connect('c-events', 'alice');
    const seen: string[] = [];
    for await (const e of client.events({ pageSize: 2 }))
      seen.push(`${e.type}:${(e.payload as { connectionId?: string }).connectionId ?? ''}`);
    expect(seen).toContain(`connection.created:${id}`);
    expect(seen.length).toBeGreaterThan(2);

    let delivery = sink.accepted().find((d) => (d.body.data as { connectionId?: string }).connectionId === id);
    for (let i = 0; !delivery && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      delivery = sink.accepted().find((d) => (d.body.data as { connectionId?: string }).connectionId === id);
    }
    expect(delivery).toBeDefined();
    const event: VerifiedEvent = verifyEvent(delivery!.headers, delivery!.raw, eventsSecret);
    expect(event.source).toBe('service');
    if (event.source !== 'service' || event.type !== 'connection.created') throw new Error(`not a connection.created: ${event.type}`);
    // Narrowed: data is ConnectionEventData<'connection.created'>.
    expect(event.data).toEqual({
      type: 'connection.created',
      connectionId: id,
      tenantId: 'client-co',
      kind: 'user',
      userId: 'c-events',
      upstreamUserId: 'alice',
    });
    expect(event.id).toBe(delivery!.headers['webhook-id']);

    expect(() => verifyEvent(delivery!.headers, delivery!.raw.replace('c-events', 'c-evil'), eventsSecret)).toThrow(EventVerificationError);
    expect(() => verifyEvent(delivery!.headers, delivery!.raw, `whsec_${randomBytes(24).toString('base64')}`)).toThrow(
      EventVerificationError,
    );
    expect(() =>
      verifyEvent({ ...delivery!.headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) }, delivery!.raw, eventsSecret),
    ).toThrow(EventVerificationError);
  });

  it('hands upstream deliveries through as upstream events', async () => {
    const event = verifyEvent(
      ...signed(
        { type: 'workflow_step_updated', timestamp: new Date().toISOString(), data: { event: 'workflow_step_updated', workflowId: 'w1' } },
        eventsSecret,
      ),
    );
    expect(event).toMatchObject({ source: 'upstream', type: 'workflow_step_updated', data: { workflowId: 'w1' } });
  });
});

/** Signs a body with the service's own signer (src/events/standard-webhooks.ts), as it forwards an upstream delivery. */
function signed(body: object, secret: string): [Record<string, string>, string, string] {
  const raw = JSON.stringify(body);
  const id = `evt_${randomBytes(8).toString('hex')}`;
  const ts = Math.floor(Date.now() / 1000);
  return [{ ...signDelivery(secret, id, ts, raw) }, raw, secret];
}

/**
 * Paging by `next` (API.md section 6), against a server that answers exactly that shape: the service on this
 * branch answers every connection in one array, which the test above covers.
 */
describe('the node client pages connections by next', () => {
  let server: Server;
  let base: string;
  const asked: string[] = [];
  const rows = Array.from({ length: 5 }, (_, i) => ({ id: `00000000-0000-4000-8000-00000000000${i}`, kind: 'user', userId: `u${i}` }));

  beforeAll(async () => {
    server = createServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      asked.push(url.search);
      const limit = Number(url.searchParams.get('limit'));
      const start = url.searchParams.get('after') ? Number(url.searchParams.get('after')) : 0;
      const page = rows.slice(start, start + limit);
      const next = start + limit < rows.length ? String(start + limit) : null;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ connections: page, next }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('follows next until it is null, passing the filter on every page', async () => {
    const client = new CwsConnectClient({ baseUrl: base, apiKey: 'cwsk_x', tenantId: 't' });
    const ids: string[] = [];
    for await (const c of client.listConnections({ limit: 2, kind: 'user' })) ids.push(c.id);
    expect(ids).toEqual(rows.map((r) => r.id));
    expect(asked).toEqual(['?limit=2&kind=user', '?limit=2&kind=user&after=2', '?limit=2&kind=user&after=4']);
  });
});
