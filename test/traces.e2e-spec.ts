import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RefreshScheduler } from '../src/refresh/refresh-scheduler.service.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { WebhookReceiversRepository } from '../src/webhooks/webhook-receivers.repository.js';
import { receiverRef } from '../src/webhooks/webhooks.service.js';
import { SandboxServer } from 'cws-sandbox';
import { newTenant } from './support/connect.js';
import { seedConnections } from './support/seed-connections.js';
import { startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { WebhookSink } from './support/webhook-sink.js';

/** A span as an OTLP/HTTP JSON export carries it, attributes flattened. */
interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

const SERVER = 2;
const CLIENT = 3;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}

/** An OTLP/HTTP receiver (JSON encoding): keeps every request body as received and the spans in it. */
class OtlpReceiver {
  readonly bodies: string[] = [];
  readonly spans: ExportedSpan[] = [];
  url = '';
  private server!: Server;

  static async start(): Promise<OtlpReceiver> {
    const r = new OtlpReceiver();
    r.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (req.url !== '/v1/traces' || !(req.headers['content-type'] ?? '').startsWith('application/json')) {
          res.writeHead(415).end();
          return;
        }
        r.bodies.push(text);
        r.collect(JSON.parse(text) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }> });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
    return r;
  }

  private collect(body: { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }> }): void {
    for (const rs of body.resourceSpans)
      for (const ss of rs.scopeSpans)
        for (const s of ss.spans) {
          const attributes: Record<string, unknown> = {};
          for (const a of (s.attributes as Array<{ key: string; value: OtlpValue }> | undefined) ?? []) {
            const v = a.value;
            attributes[a.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
          }
          this.spans.push({
            traceId: s.traceId as string,
            spanId: s.spanId as string,
            parentSpanId: (s.parentSpanId as string | undefined) ?? '',
            name: s.name as string,
            kind: s.kind as number,
            attributes,
          });
        }
  }

  /** Waits until a span matching `pick` has arrived. */
  async waitFor(pick: (s: ExportedSpan) => boolean, what: string): Promise<ExportedSpan> {
    for (let i = 0; i < 200; i++) {
      const found = this.spans.find(pick);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no span arrived: ${what}; got ${this.spans.map((s) => s.name).join(', ')}`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A pass-through in front of the sandbox that records each request's traceparent (the upstream's view). */
class TraceparentRecorder {
  readonly seen: Array<{ method: string; path: string; traceparent: string | undefined }> = [];
  url = '';
  private server!: Server;

  static async start(target: string): Promise<TraceparentRecorder> {
    const r = new TraceparentRecorder();
    const to = new URL(target);
    r.server = createServer((req, res) => {
      r.seen.push({ method: req.method ?? '', path: (req.url ?? '').split('?')[0], traceparent: header(req.headers, 'traceparent') });
      const out = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.on('error', () => res.destroy());
      req.pipe(out);
    });
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
    return r;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

const VAULT_KEYS = testVaultKey('traces');

describe('traces (OpenTelemetry over OTLP)', () => {
  let receiver: OtlpReceiver;
  let sandbox: SandboxServer;
  let recorder: TraceparentRecorder;
  let sink: WebhookSink;
  let t: TestApp;
  let apiKey: string;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    sink = await WebhookSink.start();
    // The sandbox runs outside the test app so that its token and API calls can pass through the recorder.
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    recorder = await TraceparentRecorder.start(sandbox.url);
    t = await startTestApp({
      sandbox: false,
      env: {
        VAULT_KEYS,
        PORT: '0',
        REFRESH_SCHEDULER: 'off',
        CWS_SANDBOX_AUTH_URL: recorder.url,
        CWS_SANDBOX_CLIENT_ID: sandbox.clientId,
        CWS_SANDBOX_CLIENT_SECRET: sandbox.clientSecret,
        CWS_SANDBOX_SCOPES: sandbox.scopes.join(' '),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        EVENTS_POLL_INTERVAL_MS: '500',
        EVENTS_RELAY_INTERVAL_MS: '50',
      },
    });
    await newTenant(t, 'acme', { eventsTargetUrl: sink.url });
    const created = await t.request<{ key: string }>('POST', '/v1/tenants/acme/api-keys', { body: { name: 'traces' } });
    apiKey = created.body.key;
  });

  afterAll(async () => {
    await t?.close();
    await recorder?.close();
    await sandbox?.close();
    await sink?.close();
    await receiver?.close();
  });

  it('a facade call: the server span continues the caller trace, the upstream call is its child and the upstream sees its traceparent', async () => {
    const [alice] = await seedConnections(t.db, VAULT_KEYS, [
      { tenantId: 'acme', userId: 'u-alice', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
    ]);
    const partnerTrace = randomBytes(16).toString('hex');
    const partnerSpan = randomBytes(8).toString('hex');
    const res = await t.request('GET', '/v1/tenants/acme/workflows?status=draft', {
      key: apiKey,
      headers: { 'x-user-id': 'u-alice', traceparent: `00-${partnerTrace}-${partnerSpan}-01` },
    });
    expect(res.status).toBe(200);

    const server = await receiver.waitFor((s) => s.traceId === partnerTrace && s.kind === SERVER, 'the facade server span');
    expect(server.parentSpanId).toBe(partnerSpan);
    expect(server.name).toBe('GET /v1/tenants/{tenantId}/workflows');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/v1/tenants/{tenantId}/workflows',
      'http.response.status_code': 200,
      'tenant.id': 'acme',
    });
    // The path without its query string.
    expect(server.attributes['url.path']).toBe('/v1/tenants/acme/workflows');

    const upstream = await receiver.waitFor(
      (s) => s.traceId === partnerTrace && s.name === 'GET upstream' && s.parentSpanId === server.spanId,
      'the upstream client span',
    );
    expect(upstream.kind).toBe(CLIENT);
    expect(upstream.attributes).toMatchObject({
      'tenant.id': 'acme',
      'connection.id': alice.id,
      'cws.environment': 'sandbox',
      'cws.token_kind': 'user',
      'http.request.method': 'GET',
      'http.response.status_code': 200,
    });
    expect(upstream.attributes['url.full']).toBe(`${recorder.url}/workflows`);
    const seen = recorder.seen.filter((r) => r.method === 'GET' && r.path === '/workflows');
    expect(seen.at(-1)?.traceparent).toBe(`00-${partnerTrace}-${upstream.spanId}-01`);

    // The database calls the request made (the tenant key, the connection) belong to the same trace.
    const db = await receiver.waitFor(
      (s) => s.traceId === partnerTrace && (s.attributes['db.system.name'] ?? s.attributes['db.system']) === 'postgresql',
      'a database span',
    );
    expect(db.kind).toBe(CLIENT);
  });

  it("an agent's tool call: a span of its own under the request's, the upstream call its child, the audit row names the trace", async () => {
    const minted = await t.request<{ token: string; mcpUrl: string; id: string }>('POST', '/v1/tenants/acme/agent-sessions', {
      key: apiKey,
      body: { userId: 'u-alice' },
    });
    expect(minted.status).toBe(201);
    const trace = randomBytes(16).toString('hex');
    const res = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${minted.body.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        traceparent: `00-${trace}-${randomBytes(8).toString('hex')}-01`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'facadeListWorkflows', arguments: {} } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result: { isError?: boolean } }).result.isError).toBeFalsy();
    const server = await receiver.waitFor((s) => s.traceId === trace && s.kind === SERVER, 'the MCP server span');
    expect(server.name).toBe('POST /mcp');
    const call = await receiver.waitFor((s) => s.traceId === trace && s.name === 'agent.tool_call', 'the tool call span');
    expect(call.parentSpanId).toBe(server.spanId);
    expect(call.attributes).toMatchObject({
      'tenant.id': 'acme',
      'cws.agent.session': minted.body.id,
      'cws.agent.tool': 'facadeListWorkflows',
    });
    await receiver.waitFor((s) => s.traceId === trace && s.name === 'GET upstream' && s.parentSpanId === call.spanId, 'the upstream call');
    const audit = await t.request<{ items: Array<{ action: string; traceId: string | null }> }>('GET', '/v1/tenants/acme/audit', {
      key: apiKey,
    });
    expect(audit.body.items.find((i) => i.action === 'agent.tool_call')?.traceId).toBe(trace);
    expect(JSON.stringify(receiver.spans)).not.toContain(minted.body.token);
  });

  it('a scheduled renewal: a root span with the connection, its token call a child that the token endpoint sees', async () => {
    const [bob] = await seedConnections(t.db, VAULT_KEYS, [
      { tenantId: 'acme', userId: 'u-bob', upstreamUserId: 'bob', tokens: sandbox.issueTokens('bob'), dueAt: new Date(Date.now() - 1000) },
    ]);
    expect(await t.app.get(RefreshScheduler).runOnce()).toBeGreaterThanOrEqual(1);

    const renewal = await receiver.waitFor((s) => s.name === 'renewal' && s.attributes['connection.id'] === bob.id, 'the renewal span');
    expect(renewal.parentSpanId).toBe('');
    expect(renewal.attributes).toMatchObject({ 'tenant.id': 'acme', 'cws.environment': 'sandbox', 'cws.renewal.mode': 'scheduled' });
    const token = await receiver.waitFor(
      (s) => s.traceId === renewal.traceId && s.parentSpanId === renewal.spanId && s.name === 'POST oauth token',
      'the token call span',
    );
    expect(token.kind).toBe(CLIENT);
    expect(token.attributes).toMatchObject({
      'cws.environment': 'sandbox',
      'cws.grant_type': 'refresh_token',
      'http.response.status_code': 200,
    });
    expect(recorder.seen.some((r) => r.path === '/oauth/token' && r.traceparent === `00-${renewal.traceId}-${token.spanId}-01`)).toBe(true);
    const state = await t.db.query<{ version: number }>('SELECT version FROM connections WHERE id = $1', [bob.id]);
    expect(Number(state.rows[0].version)).toBeGreaterThan(1);
  });

  it('an event carries the trace that created it to the partner, as traceparent', async () => {
    const [carol] = await seedConnections(t.db, VAULT_KEYS, [
      { tenantId: 'acme', userId: 'u-carol', upstreamUserId: 'carol', tokens: sandbox.issueTokens('carol') },
    ]);
    const callerTrace = randomBytes(16).toString('hex');
    const res = await t.request('DELETE', `/v1/tenants/acme/connections/${carol.id}`, {
      headers: { traceparent: `00-${callerTrace}-${randomBytes(8).toString('hex')}-01` },
    });
    expect(res.status).toBe(204);

    const stored = await t.db.query<{ traceparent: string | null }>(
      `SELECT traceparent FROM events WHERE type = 'connection.deleted' AND payload->>'connectionId' = $1`,
      [carol.id],
    );
    expect(stored.rows[0]?.traceparent).toMatch(new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-01$`));

    const delivery = await receiver.waitFor((s) => s.traceId === callerTrace && s.name === 'POST event delivery', 'the delivery span');
    expect(delivery.attributes).toMatchObject({
      'tenant.id': 'acme',
      'cws.event.type': 'connection.deleted',
      'http.response.status_code': 200,
    });
    expect(delivery.attributes['url.full']).toBe(new URL(sink.url).origin);
    const received = sink.received.find((d) => d.body.type === 'connection.deleted');
    expect(received?.headers.traceparent).toBe(`00-${callerTrace}-${delivery.spanId}-01`);
  });

  it('an inbound delivery: its server span continues the upstream caller trace, and its event carries that trace', async () => {
    // A receiver as webhook provisioning stores one (webhooks.service.ts), without the upstream round trip.
    const receiverId = randomUUID();
    const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
    await t.app.get(WebhookReceiversRepository).insert({
      id: receiverId,
      tenantId: 'acme',
      authMethod: 'bearer',
      secretEnc: await t.app.get(TokenVault).seal(authorization, receiverRef('acme', receiverId)),
    });
    const upstreamTrace = randomBytes(16).toString('hex');
    const res = await fetch(`${t.url}/inbound/acme/${receiverId}`, {
      method: 'POST',
      headers: {
        authorization,
        'content-type': 'application/json',
        traceparent: `00-${upstreamTrace}-${randomBytes(8).toString('hex')}-01`,
      },
      body: JSON.stringify({ event: 'workflow_step_updated', workflowId: 'wf-traced', transition: 'Review' }),
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };

    const server = await receiver.waitFor((s) => s.traceId === upstreamTrace && s.kind === SERVER, 'the inbound server span');
    expect(server.attributes).toMatchObject({ 'http.route': '/inbound/{tenantId}/{receiverId}', 'tenant.id': 'acme' });
    const stored = await t.db.query<{ traceparent: string | null }>('SELECT traceparent FROM events WHERE id = $1', [id]);
    expect(stored.rows[0]?.traceparent).toBe(`00-${upstreamTrace}-${server.spanId}-01`);
  });

  it('a sync run: a listing is a root span with its figures, its upstream call a child; a targeted read continues the inbound trace', async () => {
    await newTenant(t, 'synced');
    const [dave] = await seedConnections(t.db, VAULT_KEYS, [
      { tenantId: 'synced', userId: 'u-dave', upstreamUserId: 'dave', tokens: sandbox.issueTokens('dave') },
    ]);
    const launched = await t.request<{ id: string }>('POST', '/v1/tenants/synced/workflows', {
      headers: { 'x-user-id': 'u-dave' },
      body: { name: 'Traced NDA with Initech', approvers: [] },
    });
    expect(launched.status).toBe(201);
    const workflowId = launched.body.id;
    expect((await t.request('PATCH', '/v1/tenants/synced', { body: { sync: { workflows: true } } })).status).toBe(200);
    expect((await t.request('POST', '/v1/tenants/synced/sync', { body: { userId: 'u-dave' } })).status).toBe(202);

    const listing = await receiver.waitFor(
      (s) => s.name === 'sync.listing' && s.attributes['connection.id'] === dave.id && s.attributes['cws.sync.outcome'] === 'listed',
      'the sync listing span',
    );
    expect(listing.parentSpanId).toBe('');
    expect(listing.attributes).toMatchObject({ 'tenant.id': 'synced', 'cws.sync.kind': 'listing', 'cws.sync.pages': 1 });
    expect(listing.attributes['cws.sync.changes']).toBeGreaterThanOrEqual(1);
    const listCall = await receiver.waitFor(
      (s) => s.traceId === listing.traceId && s.parentSpanId === listing.spanId && s.name === 'GET upstream',
      "the listing's upstream call",
    );
    expect(listCall.attributes).toMatchObject({ 'connection.id': dave.id, 'cws.token_kind': 'user', 'http.response.status_code': 200 });
    expect(listCall.attributes['url.full']).toBe(`${recorder.url}/workflows`);

    // The workflow changes upstream; an inbound delivery names it: its read is a child of that delivery's span.
    sandbox.setWorkflowAttribute(workflowId, 'name', 'Traced NDA, second draft');
    const receiverId = randomUUID();
    const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
    await t.app.get(WebhookReceiversRepository).insert({
      id: receiverId,
      tenantId: 'synced',
      authMethod: 'bearer',
      secretEnc: await t.app.get(TokenVault).seal(authorization, receiverRef('synced', receiverId)),
    });
    const upstreamTrace = randomBytes(16).toString('hex');
    const res = await fetch(`${t.url}/inbound/synced/${receiverId}`, {
      method: 'POST',
      headers: {
        authorization,
        'content-type': 'application/json',
        traceparent: `00-${upstreamTrace}-${randomBytes(8).toString('hex')}-01`,
      },
      body: JSON.stringify({ event: 'workflow_step_updated', workflowId, transition: 'Review' }),
    });
    expect(res.status).toBe(200);
    const inbound = await receiver.waitFor((s) => s.traceId === upstreamTrace && s.kind === SERVER, 'the inbound server span');
    const read = await receiver.waitFor((s) => s.traceId === upstreamTrace && s.name === 'sync.read', 'the targeted read span');
    expect(read.parentSpanId).toBe(inbound.spanId);
    expect(read.attributes).toMatchObject({
      'tenant.id': 'synced',
      'connection.id': dave.id,
      'cws.sync.kind': 'read',
      'cws.sync.pages': 1,
      'cws.sync.changes': 1,
      'cws.sync.outcome': 'read',
    });
    const readCall = await receiver.waitFor(
      (s) => s.traceId === upstreamTrace && s.parentSpanId === read.spanId && s.name === 'GET upstream',
      "the targeted read's upstream call",
    );
    expect(readCall.attributes['url.full']).toBe(`${recorder.url}/workflows/${encodeURIComponent(workflowId)}`);
    // Figures only: no workflow's content in any sync span.
    const syncSpans = JSON.stringify(receiver.spans.filter((s) => s.name.startsWith('sync.')));
    expect(syncSpans).not.toContain('Traced NDA');

    // The metrics count the calls and the changes, and expose the lag.
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/^cws_sync_upstream_calls_total\{kind="list",outcome="ok"\} [1-9]/m);
    expect(metrics).toMatch(/^cws_sync_upstream_calls_total\{kind="read",outcome="ok"\} [1-9]/m);
    expect(metrics).toMatch(/^cws_sync_changes_total\{action="added"\} [1-9]/m);
    expect(metrics).toMatch(/^cws_sync_changes_total\{action="updated"\} [1-9]/m);
    expect(metrics).toMatch(/^cws_sync_lag_seconds \d/m);
  });

  it('no span carries a token, a key, a client secret or a connect-link token', async () => {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-dave', returnUrl: 'http://localhost:5173/done' },
    });
    expect(session.status).toBe(201);
    const link = new URL(session.body.connectUrl);
    const linkToken = link.pathname.split('/').at(-1) ?? '';
    expect(linkToken.length).toBeGreaterThan(16);
    await fetch(new URL(link.pathname, t.url), { redirect: 'manual' });
    const opened = await receiver.waitFor(
      (s) => s.kind === SERVER && String(s.attributes['url.path']).startsWith('/connect/'),
      'the connect link span',
    );
    expect(opened.attributes['url.path']).toBe('/connect/[redacted]');

    await new Promise((r) => setTimeout(r, 300)); // the last batch
    const exported = receiver.bodies.join('\n');
    expect(receiver.spans.length).toBeGreaterThan(10);
    const secrets = [...sandbox.issuedTokenValues(), apiKey, t.operatorKey, sandbox.clientSecret, linkToken];
    expect(secrets.length).toBeGreaterThan(6);
    for (const secret of secrets) expect(exported.includes(secret)).toBe(false);
    expect(exported).not.toMatch(/Bearer |authorization/i);
  });
});
