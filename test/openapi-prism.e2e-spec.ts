import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../src/common/free-port.js';
import { authorizeAtSandbox, openCallback } from './support/connect.js';
import { startPrismProxy, type PrismProxy } from './support/prism.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { WebhookSink } from './support/webhook-sink.js';

/**
 * The published OpenAPI document is exact: a session that calls every operation, with answers from 200 to 504
 * (the service's own errors and the upstream's passed through, the sandbox made to fail), runs through
 * Stoplight Prism's validation proxy and Prism finds no violation, in a request or in an answer.
 */

type Json = Record<string, unknown>;
interface Operation {
  operationId: string;
  security?: Json[];
  requestBody?: { required?: boolean; content: Record<string, { schema?: Json }> };
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Json> };
}
interface Exchange {
  op: string;
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * HEAD is documented (the generic proxy takes every method) but cannot pass Prism 5.16: it parses the empty body
 * of a HEAD answer as the JSON its content-type names, and fails the exchange itself.
 */
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options'];

/** A value the schema accepts (required properties only), for a request body the document asks for. */
function sample(doc: Document, schema: Json | undefined): unknown {
  if (!schema) return {};
  if (typeof schema.$ref === 'string') return sample(doc, doc.components.schemas[schema.$ref.split('/').pop()!]);
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'array') return [sample(doc, schema.items as Json)];
  if (type === 'integer' || type === 'number') return schema.minimum ?? 1;
  if (type === 'boolean') return true;
  if (type === 'string') return schema.format === 'date-time' ? new Date().toISOString() : 'https://example.com/x';
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  return Object.fromEntries(((schema.required ?? []) as string[]).map((name) => [name, sample(doc, properties[name])]));
}

describe('the OpenAPI document, checked by a validation proxy (Stoplight Prism) over a whole session', () => {
  let t: TestApp;
  let prism: PrismProxy;
  let doc: Document;
  let dir: string;
  const exchanges: Exchange[] = [];
  const upstream = () => t.sandbox!;

  /** One call through Prism, recorded under its operation. */
  async function call(
    op: string,
    method: string,
    path: string,
    init: { key?: string | null; headers?: Record<string, string>; body?: unknown; raw?: string; type?: string } = {},
  ): Promise<Exchange> {
    const headers: Record<string, string> = { ...init.headers };
    const key = init.key === undefined ? t.operatorKey : init.key;
    if (key) headers.authorization = `Bearer ${key}`;
    let body: string | undefined = init.raw;
    if (init.body !== undefined) body = JSON.stringify(init.body);
    if (body !== undefined) headers['content-type'] = init.type ?? 'application/json';
    const res = await fetch(prism.url + path, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    const exchange = { op, status: res.status, headers: res.headers, body: parsed };
    exchanges.push(exchange);
    // Prism names every violation of the request or the answer in this header; the service always sets its request id.
    expect([op, method, path, res.headers.get('sl-violations')]).toEqual([op, method, path, null]);
    expect([op, method, path, res.headers.get('x-request-id') !== null]).toEqual([op, method, path, true]);
    return exchange;
  }

  async function expectCall(status: number, ...args: Parameters<typeof call>): Promise<Exchange> {
    const exchange = await call(...args);
    expect([args[0], args[1], args[2], exchange.status]).toEqual([args[0], args[1], args[2], status]);
    return exchange;
  }

  /** Connects a user (or the admin) the way a browser does: the connect link and the callback go to the service itself. */
  async function connect(tenant: string, kind: 'user' | 'admin', as: string, userId?: string): Promise<string> {
    const session = await expectCall(201, 'createConnectSession', 'POST', `/v1/tenants/${tenant}/connect-sessions`, {
      body: { kind, ...(userId ? { userId } : {}), returnUrl: 'http://localhost:5173/done' },
    });
    const direct = (url: string) => url.replace(prism.url, t.url);
    const callback = await authorizeAtSandbox(direct((session.body as { connectUrl: string }).connectUrl), as, 'approve');
    const back = await openCallback({ ...callback, url: direct(callback.url) });
    const connectionId = new URL(back.headers.get('location')!).searchParams.get('connectionId');
    if (!connectionId) throw new Error(`no connection: ${back.headers.get('location')}`);
    return connectionId;
  }

  beforeAll(async () => {
    const prismPort = await freePort();
    // Deliveries from the upstream reach the service through Prism too (PUBLIC_URL names the self-targeted webhook's address).
    t = await startTestApp({
      env: {
        PUBLIC_URL: `http://127.0.0.1:${prismPort}`,
        UPSTREAM_TIMEOUT_MS: '1000',
        FACADE_TENANT_MAX_IN_FLIGHT: '1',
        FACADE_TENANT_MAX_UPLOADS: '1',
      },
    });
    doc = (await t.request<Document>('GET', '/docs-json', { key: null })).body;
    dir = mkdtempSync(join(tmpdir(), 'cws-prism-'));
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    prism = await startPrismProxy(file, t.url, prismPort);
  });

  afterAll(async () => {
    await prism?.close();
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('operators and tenants: tenants, keys, connect sessions, connections, renewals (lastError null and set)', async () => {
    await expectCall(201, 'createTenant', 'POST', '/v1/tenants', {
      body: { id: 'acme', name: 'Acme', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    await expectCall(409, 'createTenant', 'POST', '/v1/tenants', {
      body: { id: 'acme', name: 'Acme', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    await expectCall(400, 'createTenant', 'POST', '/v1/tenants', {
      body: { name: 'Bad', environment: 'sandbox', allowedReturnUrls: ['not a url'] },
    });
    await expectCall(413, 'createTenant', 'POST', '/v1/tenants', {
      body: { name: 'x'.repeat(1_100_000), environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    await expectCall(422, 'createTenant', 'POST', '/v1/tenants', {
      body: { name: 'Elsewhere', environment: 'na', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    await expectCall(201, 'createTenant', 'POST', '/v1/tenants', {
      body: {
        id: 'users-only',
        name: 'Users only',
        environment: 'sandbox',
        design: 'users',
        allowedReturnUrls: ['http://localhost:5173/'],
      },
    });
    await expectCall(200, 'listTenants', 'GET', '/v1/tenants');
    await expectCall(200, 'getTenant', 'GET', '/v1/tenants/acme');
    await expectCall(200, 'updateTenant', 'PATCH', '/v1/tenants/acme', { body: { name: 'Acme Legal' } });
    await expectCall(400, 'updateTenant', 'PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: 'not a url' } });
    await expectCall(201, 'rotateEventsSecret', 'POST', '/v1/tenants/acme/events-secret', { body: {} });
    const created = await expectCall(201, 'createApiKey', 'POST', '/v1/tenants/acme/api-keys', { body: { name: 'ci' } });
    const tenantKey = (created.body as { key: string }).key;
    await expectCall(403, 'listTenants', 'GET', '/v1/tenants', { key: tenantKey });
    await expectCall(404, 'getTenant', 'GET', '/v1/tenants/users-only', { key: tenantKey });
    await expectCall(200, 'listApiKeys', 'GET', '/v1/tenants/acme/api-keys');
    const spare = await expectCall(201, 'createApiKey', 'POST', '/v1/tenants/acme/api-keys', { body: {} });
    await expectCall(204, 'revokeApiKey', 'DELETE', `/v1/tenants/acme/api-keys/${(spare.body as { id: string }).id}`);
    await expectCall(404, 'revokeApiKey', 'DELETE', `/v1/tenants/acme/api-keys/${randomUUID()}`);
    await expectCall(400, 'createConnectSession', 'POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', returnUrl: 'https://elsewhere.example/' },
    });

    const alice = await connect('acme', 'user', 'alice', 'u-alice');
    await connect('acme', 'user', 'bob', 'u-bob');
    await connect('acme', 'admin', 'admin');
    await connect('users-only', 'user', 'carol', 'u-carol');
    const page = await expectCall(200, 'listConnections', 'GET', '/v1/tenants/acme/connections?limit=2', { key: tenantKey });
    expect((page.body as { connections: Array<{ lastError: unknown }> }).connections[0].lastError).toBeNull();
    await expectCall(400, 'listConnections', 'GET', '/v1/tenants/acme/connections?after=not-a-cursor');
    await expectCall(200, 'getConnection', 'GET', `/v1/tenants/acme/connections/${alice}`);
    await expectCall(404, 'getConnection', 'GET', `/v1/tenants/acme/connections/${randomUUID()}`);
    await expectCall(200, 'refreshConnection', 'POST', `/v1/tenants/acme/connections/${alice}/refresh`);
    upstream().setFault({ mode: 'status', status: 503, paths: ['/oauth/token'] });
    await expectCall(502, 'refreshConnection', 'POST', `/v1/tenants/acme/connections/${alice}/refresh`);
    upstream().setFault(null);
    // The failed renewal is kept in the connection's history after the answer, not before it.
    for (let i = 0; i < 100; i++) {
      const seen = await t.request<{ lastError: unknown }>('GET', `/v1/tenants/acme/connections/${alice}`);
      if (seen.body.lastError !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const failed = await expectCall(200, 'getConnection', 'GET', `/v1/tenants/acme/connections/${alice}`);
    expect((failed.body as { lastError: { code: string } | null }).lastError).toEqual(
      expect.objectContaining({ code: expect.any(String) }),
    );
    await expectCall(200, 'listConnectionRenewals', 'GET', `/v1/tenants/acme/connections/${alice}/renewals`);
    const carol = (
      (await expectCall(200, 'listConnections', 'GET', '/v1/tenants/users-only/connections')).body as { connections: Array<{ id: string }> }
    ).connections[0].id;
    await expectCall(204, 'deleteConnection', 'DELETE', `/v1/tenants/users-only/connections/${carol}`);
    await expectCall(404, 'deleteConnection', 'DELETE', `/v1/tenants/users-only/connections/${carol}`);
  });

  it('the facade and webhooks: the upstream answers and its errors passed through, and our own', async () => {
    const as = { 'x-user-id': 'u-alice' };
    const launched = await expectCall(201, 'facadeLaunchWorkflow', 'POST', '/v1/tenants/acme/workflows', {
      headers: as,
      body: { name: 'NDA', approvers: ['bob'] },
    });
    const wf = (launched.body as { id: string }).id;
    await expectCall(400, 'facadeLaunchWorkflow', 'POST', '/v1/tenants/acme/workflows', {
      headers: as,
      body: { name: 'x', creator: 'bob' },
    });
    await expectCall(202, 'facadeLaunchWorkflowAsync', 'POST', '/v1/tenants/acme/workflows/async', {
      headers: as,
      body: { name: 'Async' },
    });
    await expectCall(200, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows?step=Create', { headers: as });
    const refused = await expectCall(400, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows?step=Nowhere', { headers: as });
    expect(refused.headers.get('x-upstream-status')).toBe('400');
    await expectCall(400, 'facadeListWorkflows', 'GET', '/v1/tenants/users-only/workflows');
    await expectCall(409, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-nobody' } });
    await expectCall(200, 'facadeGetWorkflow', 'GET', `/v1/tenants/acme/workflows/${wf}`, { headers: as });
    await expectCall(404, 'facadeGetWorkflow', 'GET', '/v1/tenants/acme/workflows/wf_missing', { headers: as });
    await expectCall(403, 'facadeApproveWorkflow', 'PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as, body: {} });
    await expectCall(200, 'facadeApproveWorkflow', 'PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, {
      headers: { 'x-user-id': 'u-bob' },
      body: { comment: 'fine' },
    });
    const boundary = 'cwsprismboundary';
    const multipart = [
      `--${boundary}`,
      'Content-Disposition: form-data; name="file"; filename="signed.txt"',
      'Content-Type: text/plain',
      '',
      'signed',
      `--${boundary}--`,
      '',
    ].join('\r\n');
    const upload = { headers: as, raw: multipart, type: `multipart/form-data; boundary=${boundary}` };
    await expectCall(409, 'facadeUploadSigned', 'POST', `/v1/tenants/acme/workflows/${wf}/upload-signed`, upload);
    upstream().setWorkflowStep(wf, 'Sign');
    await expectCall(200, 'facadeUploadSigned', 'POST', `/v1/tenants/acme/workflows/${wf}/upload-signed`, upload);
    await expectCall(200, 'facadeMe', 'GET', '/v1/tenants/acme/me', { headers: as });

    // The generic proxy: paths of one to three segments, any status.
    await expectCall(200, 'facadeProxy2_get', 'GET', `/v1/tenants/acme/proxy/workflows/${wf}`, { headers: as });
    const twice = await expectCall(403, 'facadeProxy3_patch', 'PATCH', `/v1/tenants/acme/proxy/workflows/${wf}/approvals`, {
      headers: { 'x-user-id': 'u-bob' },
      body: {},
    });
    expect(twice.headers.get('x-upstream-status')).toBe('403');
    await expectCall(201, 'facadeProxy_post', 'POST', '/v1/tenants/acme/proxy/workflows', { headers: as, body: { name: 'Proxied' } });
    await expectCall(405, 'facadeProxy_delete', 'DELETE', '/v1/tenants/acme/proxy/workflows', { headers: as });
    await expectCall(404, 'facadeProxy_put', 'PUT', '/v1/tenants/acme/proxy/no-such-thing', { headers: as, body: {} });
    await expectCall(400, 'facadeProxy_patch', 'PATCH', '/v1/tenants/acme/proxy/..%2F..%2Fadmin', { headers: as, body: {} });
    await expectCall(400, 'facadeProxy2_get', 'GET', `/v1/tenants/acme/proxy/workflows/${wf}%2Fapprovals`, { headers: as });
    await expectCall(200, 'facadeProxy_get', 'GET', '/v1/tenants/acme/proxy/webhooks');

    // The upstream failing: its statuses passed through; unreachable (502) and too slow (504) are our own.
    for (const status of [500, 503, 429, 422]) {
      upstream().setFault({ mode: 'status', status, paths: ['/workflows'] });
      const e = await expectCall(status, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows', { headers: as });
      expect(e.headers.get('x-upstream-status')).toBe(String(status));
      upstream().setFault(null);
      if (status === 429) {
        // The upstream's 429 (without Retry-After) pauses the company's reads for a backoff of at most 1 s (docs/quotas.md).
        const paused = await expectCall(429, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows', { headers: as });
        expect([paused.headers.get('x-upstream-status'), paused.headers.get('retry-after')]).toEqual([null, '1']);
        await new Promise((r) => setTimeout(r, 1100));
      }
    }
    upstream().setFault({ mode: 'down', paths: ['/workflows'] });
    await expectCall(502, 'facadeGetWorkflow', 'GET', `/v1/tenants/acme/workflows/${wf}`, { headers: as });
    upstream().setFault({ mode: 'slow', delayMs: 1500, paths: ['/userinfo'] });
    await expectCall(504, 'facadeMe', 'GET', '/v1/tenants/acme/me', { headers: as });
    upstream().setFault(null);
    // One call in flight is this test's bound per tenant (FACADE_TENANT_MAX_IN_FLIGHT=1): a second one is refused.
    upstream().setFault({ mode: 'slow', delayMs: 500, paths: ['/workflows'] });
    const slow = call('facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows', { headers: as });
    await new Promise((r) => setTimeout(r, 150));
    await expectCall(429, 'facadeGetWorkflow', 'GET', `/v1/tenants/acme/workflows/${wf}`, { headers: as });
    expect((await slow).status).toBe(200);
    upstream().setFault(null);

    const self = await expectCall(201, 'createWebhook', 'POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated', 'workflow_attribute_updated'] },
    });
    expect((self.body as { targetURL: string }).targetURL).toContain('/inbound/acme/');
    await expectCall(201, 'createWebhook', 'POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated'], targetURL: 'https://partner.example/hooks', headers: { Authorization: 'Bearer x' } },
    });
    await expectCall(400, 'createWebhook', 'POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated'], targetURL: 'http://partner.example/hooks' },
    });
    const duplicate = await expectCall(400, 'createWebhook', 'POST', '/v1/tenants/acme/webhooks', { body: { events: ['a', 'a'] } });
    expect(duplicate.headers.get('x-upstream-status')).toBe('400');
    await expectCall(409, 'createWebhook', 'POST', '/v1/tenants/users-only/webhooks', { body: { events: ['workflow_step_updated'] } });
    await expectCall(200, 'listWebhooks', 'GET', '/v1/tenants/acme/webhooks');
    for (const status of [403, 503]) {
      upstream().setFault({ mode: 'status', status, paths: ['/webhooks'] });
      const e = await expectCall(status, 'listWebhooks', 'GET', '/v1/tenants/acme/webhooks');
      expect(e.headers.get('x-upstream-status')).toBe(String(status));
      upstream().setFault(null);
      if (status === 429) {
        // The upstream's 429 (without Retry-After) pauses the company's reads for a backoff of at most 1 s (docs/quotas.md).
        const paused = await expectCall(429, 'facadeListWorkflows', 'GET', '/v1/tenants/acme/workflows', { headers: as });
        expect([paused.headers.get('x-upstream-status'), paused.headers.get('retry-after')]).toEqual([null, '1']);
        await new Promise((r) => setTimeout(r, 1100));
      }
    }
    await expectCall(409, 'listWebhooks', 'GET', '/v1/tenants/users-only/webhooks');

    // A step change: the upstream delivers to the self-targeted webhook, through Prism, into the events.
    upstream().setWorkflowStep(wf, 'Archive');
    for (
      let i = 0;
      i < 100 &&
      !upstream()
        .deliveries()
        .some((d) => d.state === 'delivered');
      i++
    )
      await new Promise((r) => setTimeout(r, 50));
    expect(
      upstream()
        .deliveries()
        .some((d) => d.state === 'delivered'),
    ).toBe(true);
  });

  it('events, the console and the inbound door', async () => {
    const page = await expectCall(200, 'listEvents', 'GET', '/v1/tenants/acme/events?limit=50');
    const events = (page.body as { events: Array<{ id: string; source: string; payload: unknown }> }).events;
    const fromUpstream = events.find((e) => e.source === 'upstream');
    expect(fromUpstream?.payload).toEqual(expect.objectContaining({ event: 'workflow_step_updated' }));
    exchanges.push({ op: 'receiveDelivery', status: 200, headers: new Headers(), body: undefined }); // the sandbox's delivery, above
    await expectCall(400, 'listEvents', 'GET', '/v1/tenants/acme/events?after=%20');
    await expectCall(200, 'listEventAttempts', 'GET', `/v1/tenants/acme/events/${events[0].id}/attempts`);
    await expectCall(404, 'listEventAttempts', 'GET', `/v1/tenants/acme/events/${randomUUID()}/attempts`);
    await expectCall(409, 'redeliverEvent', 'POST', `/v1/tenants/acme/events/${events[0].id}/redeliver`);
    await expectCall(409, 'redeliverEventsSince', 'POST', '/v1/tenants/acme/events/redeliver', { body: { since: '2026-01-01T00:00:00Z' } });
    const sink = await WebhookSink.start();
    try {
      await expectCall(200, 'updateTenant', 'PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: sink.url } });
      await expectCall(202, 'redeliverEvent', 'POST', `/v1/tenants/acme/events/${events[0].id}/redeliver`);
      await expectCall(202, 'redeliverEventsSince', 'POST', '/v1/tenants/acme/events/redeliver', {
        body: { since: '2026-01-01T00:00:00Z', state: 'any' },
      });
    } finally {
      await sink.close();
    }
    await expectCall(401, 'receiveDelivery', 'POST', `/inbound/acme/${randomUUID()}`, {
      key: null,
      headers: { authorization: 'Bearer wrong' },
      body: {},
    });

    const signedIn = await expectCall(201, 'consoleSignIn', 'POST', '/console/api/session', {
      key: null,
      body: { operatorKey: t.operatorKey },
    });
    const cookie = signedIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const csrf = (signedIn.body as { csrfToken: string }).csrfToken;
    await expectCall(401, 'consoleSignIn', 'POST', '/console/api/session', { key: null, body: { operatorKey: 'wrong' } });
    await expectCall(400, 'consoleSignIn', 'POST', '/console/api/session', { key: null, body: { operatorKey: '' } });
    await expectCall(200, 'consoleSession', 'GET', '/console/api/session', { key: null, headers: { cookie } });
    await expectCall(401, 'consoleSession', 'GET', '/console/api/session', {
      key: null,
      headers: { cookie: `cws_console=${'A'.repeat(43)}` },
    });
    const session = { key: null, headers: { cookie, 'x-csrf-token': csrf } };
    await expectCall(200, 'consoleFigures', 'GET', '/console/api/figures', session);
    await expectCall(200, 'listTenants', 'GET', '/v1/tenants', session);
    await expectCall(403, 'consoleFigures', 'GET', '/console/api/figures', { key: null, headers: { cookie, 'x-csrf-token': 'forged' } });
    await expectCall(204, 'consoleSignOut', 'DELETE', '/console/api/session', session);
    await expectCall(401, 'consoleFigures', 'GET', '/console/api/figures', session);
    await expectCall(204, 'deleteTenant', 'DELETE', '/v1/tenants/users-only');
    await expectCall(200, 'getLiveness', 'GET', '/health/live', { key: null });
    await expectCall(200, 'getReadiness', 'GET', '/health/ready', { key: null });
  });

  it('agents: sessions minted, listed and revoked; the MCP endpoint and its resource metadata', async () => {
    const minted = await expectCall(201, 'createAgentSession', 'POST', '/v1/tenants/acme/agent-sessions', {
      body: { userId: 'u-alice', tools: ['read'], label: 'prism' },
    });
    const { id, token } = minted.body as { id: string; token: string };
    await expectCall(400, 'createAgentSession', 'POST', '/v1/tenants/acme/agent-sessions', {
      body: { userId: 'u-alice', tools: ['nothing'] },
    });
    await expectCall(200, 'listAgentSessions', 'GET', '/v1/tenants/acme/agent-sessions?userId=u-alice&limit=1');
    await expectCall(400, 'listAgentSessions', 'GET', '/v1/tenants/acme/agent-sessions?after=x');
    const mcp = { key: null, headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' } };
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'prism', version: '1' } },
    };
    await expectCall(200, 'mcp', 'POST', '/mcp', { ...mcp, body: initialize });
    await expectCall(200, 'mcp', 'POST', '/mcp', { ...mcp, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' } });
    await expectCall(202, 'mcp', 'POST', '/mcp', { ...mcp, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
    await expectCall(200, 'mcpResourceMetadata', 'GET', '/.well-known/oauth-protected-resource/mcp', { key: null });
    await expectCall(204, 'revokeAgentSession', 'DELETE', `/v1/tenants/acme/agent-sessions/${id}`);
    await expectCall(404, 'revokeAgentSession', 'DELETE', `/v1/tenants/acme/agent-sessions/${randomUUID()}`);
    await expectCall(401, 'mcp', 'POST', '/mcp', { ...mcp, body: initialize });
  });

  it('every operation that takes a key: a wrong key (401) and an unknown tenant (404), derived from the document', async () => {
    for (const [template, item] of Object.entries(doc.paths)) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op?.security?.some((s) => 'bearer' in s)) continue;
        const json = op.requestBody?.content['application/json'];
        const body = op.requestBody?.required ? sample(doc, json?.schema) : undefined;
        const fill = (tenant: string) => template.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'tenantId' ? tenant : randomUUID()));
        await expectCall(401, op.operationId, method.toUpperCase(), fill('acme'), { key: 'not-a-key', body });
        if (template.includes('{tenantId}')) await expectCall(404, op.operationId, method.toUpperCase(), fill('nowhere'), { body });
      }
    }
  });

  it("a control: the same proxy over the document's old form of `lastError` (3.0 `nullable` beside `allOf`) reports the answer", async () => {
    const old = structuredClone(doc);
    const connection = old.components.schemas.ConnectionResponseDto as { properties: Record<string, Json> };
    connection.properties.lastError = { type: 'object', nullable: true, allOf: [{ $ref: '#/components/schemas/LastErrorDto' }] };
    const file = join(dir, 'old.json');
    writeFileSync(file, JSON.stringify(old));
    const strict = await startPrismProxy(file, t.url, await freePort());
    try {
      const res = await fetch(`${strict.url}/v1/tenants/acme/connections?limit=1`, {
        headers: { authorization: `Bearer ${t.operatorKey}` },
      });
      expect(res.status).toBe(500);
      expect(res.headers.get('sl-violations')).toContain('lastError');
      // Its log line may come a moment after the answer.
      for (let i = 0; i < 50 && strict.violations().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(strict.violations().join('\n')).toContain('Request terminated with error');
    } finally {
      await strict.close();
    }
  });

  it('Prism saw no violation, and the session exercised every operation of the document', () => {
    expect(prism.violations()).toEqual([]);
    const byOp = new Map<string, Set<number>>();
    for (const e of exchanges) byOp.set(e.op, (byOp.get(e.op) ?? new Set()).add(e.status));
    const operations = Object.values(doc.paths).flatMap((item) => METHODS.filter((m) => item[m]).map((m) => item[m].operationId));
    expect(operations.filter((op) => !byOp.has(op))).toEqual([]);
    const pairs = [...byOp.values()].reduce((n, s) => n + s.size, 0);
    const statuses = [...new Set(exchanges.map((e) => e.status))].sort((a, b) => a - b);
    process.stdout.write(
      `prism: ${exchanges.length} exchanges, ${operations.length} operations, ${pairs} operation × status pairs, statuses ${statuses.join(' ')}, violations ${prism.violations().length}\n`,
    );
    expect(statuses).toEqual(expect.arrayContaining([200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 422, 429, 500, 502, 503, 504]));
  });
});
