import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ChangeFeed } from '../src/changes/change-feed.service.js';
import { FacadeFastLane } from '../src/facade/fast-lane.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error?: { code: string; message: string; requestId: string };
}

interface Init {
  key?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A call over node:http, so that the request target goes out exactly as written (fetch would resolve `..`). */
function call(t: TestApp, method: string, path: string, init: Init): Promise<Answer> {
  const headers: Record<string, string> = { ...init.headers };
  const key = init.key === undefined ? t.operatorKey : init.key;
  if (key) headers.authorization ??= `Bearer ${key}`;
  const body = init.body === undefined ? undefined : JSON.stringify(init.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method, headers }, (res) => {
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
    req.end(body);
  });
}

/** What a caller can tell apart in an answer; a request id minted here (random) is checked, then blanked. */
function comparable(res: Answer, givenId: string | undefined): { status: number; headers: Record<string, unknown>; body: unknown; requestId: string } {
  const { date, 'x-request-id': requestId, ...headers } = res.headers;
  expect(typeof date).toBe('string');
  if (givenId === undefined) expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
  else expect(requestId).toBe(givenId);
  let body = res.body;
  const error = (body as ErrorBody | undefined)?.error;
  if (typeof error === 'object') {
    expect(error.requestId).toBe(requestId);
    body = { error: { ...error, requestId: '<id>' } };
  }
  return { status: res.status, headers, body, requestId: String(requestId) };
}

/**
 * The facade's routes are served by FacadeFastLane in front of Express; FacadeController (behind the
 * global guard, pipe and filter) stays the documented contract and serves them when the lane is off.
 * Two instances on one database and one sandbox, one of each kind, must give the same answers.
 */
describe('the fast lane and the controllers answer alike', () => {
  let fast: TestApp;
  let nest: TestApp;
  let tenantKey: string;
  let wf: string;
  let serve: jest.SpiedFunction<(...args: unknown[]) => Promise<void>>;
  const as = (userId: string) => ({ 'x-user-id': userId });

  beforeAll(async () => {
    const limits = { UPSTREAM_TIMEOUT_MS: '400', UPSTREAM_RETRIES: '0' };
    fast = await startTestApp({ env: limits });
    const sandbox = fast.sandbox!;
    nest = await startTestApp({
      databaseUrl: fast.databaseUrl,
      sandbox: false,
      facadeFastLane: false,
      env: {
        ...limits,
        PORT: '0',
        OPERATOR_API_KEY: fast.operatorKey,
        VAULT_KEYS: fast.config.vaultKeys.map((k) => `${k.kid}:${k.key.toString('base64')}`).join(','),
        CWS_SANDBOX_AUTH_URL: sandbox.url,
        CWS_SANDBOX_CLIENT_ID: sandbox.clientId,
        CWS_SANDBOX_CLIENT_SECRET: sandbox.clientSecret,
        CWS_SANDBOX_SCOPES: sandbox.scopes.join(' '),
      },
    });

    await newTenant(fast, 'acme');
    await connectViaHttp(fast, 'acme', { userId: 'u-alice', as: 'alice' });
    await connectViaHttp(fast, 'acme', { userId: 'u-bob', as: 'bob' });
    const carol = await connectViaHttp(fast, 'acme', { userId: 'u-carol', as: 'carol' });
    await fast.db.query(`UPDATE connections SET status = 'reauth_required' WHERE id = $1`, [carol.connectionId]);
    await connectViaHttp(fast, 'acme', { kind: 'admin', as: 'admin' });
    tenantKey = (await fast.request<{ key: string }>('POST', '/v1/tenants/acme/api-keys', { body: {} })).body.key;
    await newTenant(fast, 'solo', { design: 'users' });
    await connectViaHttp(fast, 'solo', { userId: 'u-alice', as: 'alice' });
    await newTenant(fast, 'noadmin');
    await newTenant(fast, 'notadmin');
    // Kept as the admin connection, but alice is no company administrator: it never serves an admin route.
    expect((await connectViaHttp(fast, 'notadmin', { kind: 'admin', as: 'alice' })).error).toBe('not_admin');
    await newTenant(fast, 'corp', { design: 'admin' });
    await newTenant(fast, 'euro');
    await fast.db.query(`UPDATE tenants SET environment = 'eu' WHERE id = 'euro'`);

    const created = await fast.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', { headers: as('u-alice'), body: { name: 'NDA', approvers: ['bob'] } });
    expect(created.status).toBe(201);
    wf = created.body.id;
    for (const t of [fast, nest]) {
      const feed = t.app.get(ChangeFeed);
      for (let i = 0; i < 100 && !feed.live; i++) await new Promise((r) => setTimeout(r, 50));
    }
    serve = jest.spyOn(FacadeFastLane.prototype as unknown as { serve: (...args: unknown[]) => Promise<void> }, 'serve');
  });
  afterAll(async () => {
    serve?.mockRestore();
    await nest?.close();
    await fast?.close();
  });
  beforeEach(() => {
    fast.sandbox!.setFault(null);
    serve.mockClear();
  });

  const requestIds: string[] = [];

  /** The same call on both instances: the fast lane must have served one, the controller the other. */
  async function both(method: string, path: string, init: Init = {}) {
    const viaLane = await call(fast, method, path, init);
    expect(serve).toHaveBeenCalledTimes(1);
    const viaController = await call(nest, method, path, init);
    expect(serve).toHaveBeenCalledTimes(1);
    serve.mockClear();
    const givenId = init.headers?.['x-request-id'];
    const { requestId: laneId, ...lane } = comparable(viaLane, givenId);
    const { requestId: controllerId, ...controller } = comparable(viaController, givenId);
    requestIds.splice(0, requestIds.length, laneId, controllerId);
    return { lane, controller };
  }

  async function same(method: string, path: string, init: Init = {}) {
    const { lane, controller } = await both(method, path, init);
    expect(lane).toEqual(controller);
    return lane;
  }

  it('passes upstream answers through alike: reads, /me, /proxy, a query string, upstream refusals', async () => {
    expect(await same('GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') })).toMatchObject({ status: 200, headers: { 'x-upstream-status': '200' } });
    await same('GET', '/v1/tenants/acme/workflows?step=Create&x=%20a', { headers: as('u-bob'), key: tenantKey });
    await same('GET', `/v1/tenants/acme/workflows/${wf}`, { headers: as('u-bob') });
    expect(await same('GET', `/v1/tenants/acme/workflows/${wf}`, { headers: { ...as('u-alice'), 'x-request-id': 'caller-id' } })).toMatchObject({ status: 200 });
    expect(await same('GET', '/v1/tenants/acme/workflows/wf_missing', { headers: as('u-alice') })).toMatchObject({ status: 404, headers: { 'x-upstream-status': '404' } });
    expect(await same('GET', '/v1/tenants/acme/me', { headers: as('u-bob') })).toMatchObject({ status: 200, body: { id: 'bob' } });
    expect(await same('GET', '/v1/tenants/acme/proxy/webhooks', { headers: as('u-alice') })).toMatchObject({ status: 200 });
    expect(await same('POST', `/v1/tenants/acme/workflows/${wf}/upload-signed`, { headers: as('u-alice'), body: {} })).toMatchObject({ status: 415, headers: { 'x-upstream-status': '415' } });
    // The creator cannot approve (spec): refused upstream, passed through.
    expect(await same('PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as('u-alice'), body: {} })).toMatchObject({ status: 403 });
  });

  it('launches alike (new ids aside)', async () => {
    const { lane, controller } = await both('POST', '/v1/tenants/acme/workflows', { headers: as('u-alice'), body: { name: 'Twice', approvers: ['bob'] } });
    const strip = (a: { status: number; headers: Record<string, unknown>; body: unknown }) => ({ ...a, headers: { ...a.headers, 'content-length': '<n>' }, body: Object.keys(a.body as object).sort() });
    expect(lane).toMatchObject({ status: 201, headers: { 'x-upstream-status': '201' } });
    expect(strip(lane)).toEqual(strip(controller));
  });

  it('answers every error of API.md sections 2, 3 and 7 alike, with x-request-id', async () => {
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
      ['validation_failed', 'GET', '/v1/tenants/acme/proxy/workflows/../oauth/token', { headers: as('u-alice') }],
    ];
    for (const [code, method, path, init] of cases) {
      const answer = await same(method, path, init);
      expect([code, path, answer.body]).toMatchObject([code, path, { error: { code } }]);
      expect(answer.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8' });
      expect(answer.headers).not.toHaveProperty('x-upstream-status');
    }
  });

  it('answers upstream trouble alike: 502 upstream_unavailable, 504 upstream_timeout', async () => {
    // Both paths log a 5xx, structured, with its request id. (nestjs-pino's root logger is process-wide:
    // with two apps in one process, both write to one of their destinations.)
    const logged = (requestId: string) =>
      [...fast.logs, ...nest.logs].flatMap((l) => l.split('\n')).filter((l) => l.includes(`"requestId":"${requestId}"`) && l.includes('"msg":"request failed"'));

    fast.sandbox!.setFault({ mode: 'down', paths: ['/workflows'] });
    expect(await same('GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') })).toMatchObject({ status: 502, body: { error: { code: 'upstream_unavailable' } } });
    for (const id of requestIds) expect(logged(id)).toEqual([expect.stringContaining('could not be reached')]);

    fast.sandbox!.setFault({ mode: 'slow', delayMs: 1000, paths: ['/workflows'] });
    expect(await same('GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') })).toMatchObject({ status: 504, body: { error: { code: 'upstream_timeout' } } });
    for (const id of requestIds) expect(logged(id)).toEqual([expect.stringContaining('did not answer in time')]);
  });
});
