import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ChangeFeed } from '../src/changes/change-feed.service.js';
import { FACADE_ROUTES } from '../src/facade/facade-routes.js';
import { FacadeDoor } from '../src/facade/facade-door.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error?: { code: string; message: string; requestId: string };
}

interface Init {
  key?: string | null;
  body?: string;
  headers?: Record<string, string>;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A call over node:http, so that the request target goes out exactly as written (fetch would resolve `..`). */
function call(t: TestApp, method: string, path: string, init: Init = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...init.headers };
  const key = init.key === undefined ? t.operatorKey : init.key;
  if (key) headers.authorization ??= `Bearer ${key}`;
  if (init.body !== undefined) headers['content-type'] ??= 'application/json';
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    // A connection per call: Express leaves an unread body of a request it refuses on the connection.
    const req = httpRequest({ hostname, port, path, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** The app's log lines, parsed. */
function logLines(t: TestApp): Array<Record<string, unknown>> {
  return t.logs.flatMap((chunk) => chunk.split('\n').filter(Boolean)).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/**
 * One front door: the facade's routes (the route table) are served by FacadeDoor in front of Express; every
 * other request goes to Express. Both get their request id from the front door.
 */
describe('the front door', () => {
  let t: TestApp;
  let tenantKey: string;
  let wf: string;
  let serve: jest.SpiedFunction<(...args: unknown[]) => Promise<void>>;
  const as = (userId: string) => ({ 'x-user-id': userId });

  beforeAll(async () => {
    t = await startTestApp({ env: { UPSTREAM_TIMEOUT_MS: '400', UPSTREAM_RETRIES: '0' } });
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    await connectViaHttp(t, 'acme', { userId: 'u-bob', as: 'bob' });
    const carol = await connectViaHttp(t, 'acme', { userId: 'u-carol', as: 'carol' });
    await t.db.query(`UPDATE connections SET status = 'reauth_required' WHERE id = $1`, [carol.connectionId]);
    await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    tenantKey = (await t.request<{ key: string }>('POST', '/v1/tenants/acme/api-keys', { body: {} })).body.key;
    await newTenant(t, 'solo', { design: 'users' });
    await connectViaHttp(t, 'solo', { userId: 'u-alice', as: 'alice' });
    await newTenant(t, 'noadmin');
    await newTenant(t, 'notadmin');
    expect((await connectViaHttp(t, 'notadmin', { kind: 'admin', as: 'alice' })).error).toBe('not_admin');
    await newTenant(t, 'corp', { design: 'admin' });
    await newTenant(t, 'euro');
    await t.db.query(`UPDATE tenants SET environment = 'eu' WHERE id = 'euro'`);
    const created = await t.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', {
      headers: as('u-alice'),
      body: { name: 'NDA', approvers: ['bob'] },
    });
    expect(created.status).toBe(201);
    wf = created.body.id;
    const feed = t.app.get(ChangeFeed);
    for (let i = 0; i < 100 && !feed.live; i++) await new Promise((r) => setTimeout(r, 50));
    serve = jest.spyOn(FacadeDoor.prototype as unknown as { serve: (...args: unknown[]) => Promise<void> }, 'serve');
  });
  afterAll(async () => {
    serve?.mockRestore();
    await t?.close();
  });
  beforeEach(() => {
    t.sandbox!.setFault(null);
    serve.mockClear();
  });

  /** The route table entry FacadeDoor served the last call with (null: Express served it). */
  function servedRoute(): string | null {
    if (serve.mock.calls.length === 0) return null;
    const match = serve.mock.calls[serve.mock.calls.length - 1][2] as { route: { id: string } };
    return match.route.id;
  }

  it('serves every route of the table, documents it in /docs-json, and logs it', async () => {
    const doc = await t.request<{
      paths: Record<string, Record<string, { operationId?: string; security?: unknown; responses: Record<string, unknown> }>>;
    }>('GET', '/docs-json', { key: null });
    expect(doc.status).toBe(200);
    for (const route of FACADE_ROUTES) {
      // Served: a call of the route reaches FacadeDoor with this entry, and the upstream answers it.
      const path = `/v1/tenants/acme${route.path.replace('{workflowId}', wf).replace('{path}', 'workflows')}`;
      const method = route.method === 'ANY' ? 'GET' : route.method;
      serve.mockClear();
      const ok = await call(t, method, path, {
        headers: as('u-bob'),
        body: route.streamed.length > 0 && method !== 'GET' ? '{}' : undefined,
      });
      expect([route.id, servedRoute(), ok.headers['x-upstream-status']]).toEqual([route.id, route.id, String(ok.status)]);

      // Documented, from the same entry.
      const docPath = `/v1/tenants/{tenantId}${route.path}`;
      const op = doc.body.paths[docPath]?.[method.toLowerCase()];
      expect([route.id, op?.operationId]).toEqual([route.id, route.method === 'ANY' ? `${route.id}_get` : route.id]);
      expect(op?.security).toEqual([{ bearer: [] }]);

      // Logged, as the entry's `log` says: an answer of 400 or more, with its route and request id.
      serve.mockClear();
      const refused = await call(t, method, path, {});
      expect([route.id, refused.status, servedRoute()]).toEqual([route.id, 400, route.id]);
      const requestId = refused.headers['x-request-id'];
      const line = logLines(t).find((l) => (l.req as { id?: string } | undefined)?.id === requestId);
      expect([route.id, line]).toEqual([
        route.id,
        expect.objectContaining({ route: route.id, msg: 'request completed', res: expect.objectContaining({ statusCode: 400 }) }),
      ]);
    }
  });

  it('answers every error of API.md sections 2, 3 and 7 in the contract shape, with x-request-id', async () => {
    const cases: Array<[string, string, string, Init]> = [
      ['unauthorized', 'GET', '/v1/tenants/acme/workflows', { key: null, headers: as('u-alice') }],
      ['unauthorized', 'GET', '/v1/tenants/acme/workflows', { key: 'cwsk_not-a-real-key-at-all-000000000000', headers: as('u-alice') }],
      ['unauthorized', 'POST', '/v1/tenants/acme/workflows', { key: null, headers: { ...as('u-alice'), authorization: 'Basic eDp5' } }],
      ['tenant_not_found', 'GET', '/v1/tenants/solo/workflows', { key: tenantKey, headers: as('u-alice') }],
      ['tenant_not_found', 'GET', '/v1/tenants/nowhere/me', { headers: as('u-alice') }],
      ['user_id_required', 'GET', '/v1/tenants/acme/workflows', {}],
      ['user_not_connected', 'GET', '/v1/tenants/acme/workflows', { headers: as('u-nobody') }],
      ['user_not_connected', 'GET', '/v1/tenants/acme/me', { headers: as('u-nobody') }],
      ['admin_not_connected', 'GET', '/v1/tenants/solo/proxy/webhooks', { headers: as('u-alice') }],
      ['admin_not_connected', 'POST', '/v1/tenants/noadmin/proxy/webhooks', {}],
      ['admin_not_connected', 'GET', '/v1/tenants/notadmin/proxy/webhooks', {}],
      ['admin_not_connected', 'GET', '/v1/tenants/corp/workflows', {}],
      ['reauth_required', 'GET', '/v1/tenants/acme/workflows', { headers: as('u-carol') }],
      ['environment_not_configured', 'GET', '/v1/tenants/euro/workflows', { headers: as('u-alice') }],
      ['invalid_path', 'GET', '/v1/tenants/acme/proxy/workflows/../oauth/token', { headers: as('u-alice') }],
      ['validation_failed', 'GET', '/v1/tenants/acme/workflows/%00', { headers: as('u-alice') }],
      ['validation_failed', 'GET', '/v1/tenants/ac%00me/workflows', { headers: as('u-alice') }],
    ];
    for (const [code, method, path, init] of cases) {
      const answer = await call(t, method, path, init);
      const body = answer.body as ErrorBody;
      expect([code, path, body.error?.code]).toEqual([code, path, code]);
      expect(body.error?.requestId).toBe(answer.headers['x-request-id']);
      expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(answer.headers).not.toHaveProperty('x-upstream-status');
      expect([path, servedRoute()]).toEqual([path, expect.any(String)]);
    }
  });

  it('passes upstream answers through: status, body, x-upstream-status; a caller-given request id is kept', async () => {
    const res = await call(t, 'GET', `/v1/tenants/acme/workflows/${wf}`, { headers: { ...as('u-alice'), 'x-request-id': 'caller-id' } });
    expect([res.status, res.headers['x-upstream-status'], res.headers['x-request-id'], (res.body as { id: string }).id]).toEqual([
      200,
      '200',
      'caller-id',
      wf,
    ]);
    expect(await call(t, 'GET', '/v1/tenants/acme/workflows/wf_missing', { headers: as('u-alice') })).toMatchObject({
      status: 404,
      headers: { 'x-upstream-status': '404' },
    });
    // The creator cannot approve (spec): refused upstream, passed through.
    expect(await call(t, 'PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as('u-alice'), body: '{}' })).toMatchObject({
      status: 403,
      headers: { 'x-upstream-status': '403' },
    });
    // HEAD with a GET route, as Express derived it: the upstream's answer to a HEAD, passed through.
    const head = await call(t, 'HEAD', '/v1/tenants/acme/workflows', { headers: as('u-alice') });
    expect([head.headers['x-upstream-status'], servedRoute()]).toEqual([String(head.status), 'facadeListWorkflows']);
  });

  it('logs upstream trouble (502, 504) with its request id', async () => {
    const failed = (requestId: unknown) => logLines(t).filter((l) => l.requestId === requestId && l.msg === 'request failed');
    t.sandbox!.setFault({ mode: 'down', paths: ['/workflows'] });
    const down = await call(t, 'GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') });
    expect([down.status, (down.body as ErrorBody).error?.code]).toEqual([502, 'upstream_unavailable']);
    expect(failed(down.headers['x-request-id'])).toHaveLength(1);

    t.sandbox!.setFault({ mode: 'slow', delayMs: 1000, paths: ['/workflows'] });
    const slow = await call(t, 'GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') });
    expect([slow.status, (slow.body as ErrorBody).error?.code]).toEqual([504, 'upstream_timeout']);
    expect(failed(slow.headers['x-request-id'])).toHaveLength(1);
  });

  it('hands every other request to Express, with the request id the front door minted', async () => {
    const listed = await call(t, 'GET', '/v1/tenants', { headers: { 'x-request-id': 'op-list-1' } });
    expect([listed.status, listed.headers['x-request-id'], servedRoute()]).toEqual([200, 'op-list-1', null]);
    const minted = await call(t, 'GET', '/v1/tenants/nowhere');
    const id = minted.headers['x-request-id'];
    expect([minted.status, (minted.body as ErrorBody).error?.requestId]).toEqual([404, id]);
    await new Promise((r) => setTimeout(r, 20));
    expect(logLines(t).filter((l) => (l.req as { id?: string } | undefined)?.id === id && l.msg === 'request completed')).toHaveLength(1);

    // A facade path with a method no route takes: Express's 404, and its body is not parsed (not a 400 for bad JSON).
    // Framed by Content-Length: node:http sends a DELETE body without any framing, which is then no body but the next request.
    const other = await call(t, 'DELETE', '/v1/tenants/acme/workflows', { body: '{not json', headers: { 'content-length': '9' } });
    expect([other.status, (other.body as ErrorBody).error?.code, servedRoute()]).toEqual([404, 'route_not_found', null]);
  });

  it('refuses a request target that is not a path (absolute form) before anything else', async () => {
    const { hostname, port } = new URL(t.url);
    const absolute = await call(t, 'GET', `http://${hostname}:${port}/v1/tenants/acme/workflows`, { headers: as('u-alice') });
    expect([absolute.status, (absolute.body as ErrorBody).error?.code, servedRoute()]).toEqual([400, 'invalid_path', null]);
    expect((absolute.body as ErrorBody).error?.requestId).toBe(absolute.headers['x-request-id']);
  });
});
