import { request as httpRequest, type ClientRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { FacadeDoor } from '../../src/facade/facade-door.js';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { API_BASE, RecordingUpstream } from './recording-upstream.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`never: ${what}`);
}

/**
 * What one tenant may hold at once (FACADE_TENANT_MAX_IN_FLIGHT, FACADE_TENANT_MAX_UPLOADS): past it, 429
 * too_many_requests with Retry-After and nothing sent upstream, while another tenant is served as usual.
 */
describe('per-tenant bounds on the facade', () => {
  let t: TestApp;
  let upstream: RecordingUpstream;
  const open: ClientRequest[] = [];
  const MAX_CALLS = 4;
  const MAX_UPLOADS = 2;

  function call(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
    const { hostname, port } = new URL(t.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          hostname,
          port,
          path,
          method,
          agent: false,
          headers: { authorization: `Bearer ${t.operatorKey}`, 'x-user-id': 'u-alice', ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  /** An upload whose body stalls after a few bytes: it holds its call (and upstream socket) until destroyed. */
  function stalledUpload(tenant: string): void {
    const { hostname, port } = new URL(t.url);
    const req = httpRequest({
      hostname,
      port,
      path: `/v1/tenants/${tenant}/workflows`,
      method: 'POST',
      agent: false,
      headers: {
        authorization: `Bearer ${t.operatorKey}`,
        'x-user-id': 'u-alice',
        'content-type': 'application/json',
        'content-length': '100000',
      },
    });
    req.on('error', () => undefined);
    req.write('{"name":"');
    open.push(req);
  }

  /** A call the recording upstream holds open (no answer) until released. */
  function heldCall(tenant: string, n: number): Promise<Answer> {
    return call('GET', `/v1/tenants/${tenant}/workflows/hold-${n}`);
  }

  const holding = (tenant: string) => t.app.get(FacadeDoor).limits.holding(tenant);

  function expectRefused(res: Answer): void {
    const body = JSON.parse(res.text) as { error: { code: string; requestId: string } };
    expect([res.status, body.error.code, res.headers['retry-after']]).toEqual([429, 'too_many_requests', '1']);
    expect(body.error.requestId).toBe(res.headers['x-request-id']);
    expect(res.headers).not.toHaveProperty('x-upstream-status');
  }

  beforeAll(async () => {
    upstream = await RecordingUpstream.start();
    t = await startTestApp({
      env: {
        CWS_SANDBOX_API_URL: `${upstream.url}${API_BASE}`,
        UPSTREAM_RETRIES: '0',
        FACADE_TENANT_MAX_IN_FLIGHT: String(MAX_CALLS),
        FACADE_TENANT_MAX_UPLOADS: String(MAX_UPLOADS),
      },
    });
    upstream.target = t.sandbox!.url;
    for (const tenant of ['noisy', 'calm']) {
      await newTenant(t, tenant);
      await connectViaHttp(t, tenant, { userId: 'u-alice', as: 'alice' });
    }
    upstream.expectUser = 'alice';
  });
  afterEach(async () => {
    for (const req of open.splice(0)) req.destroy();
    upstream.release();
    await until('every call released', () => holding('noisy').calls === 0 && holding('calm').calls === 0);
    expect(upstream.violations).toEqual([]);
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  it("refuses an upload past FACADE_TENANT_MAX_UPLOADS; the tenant's reads and the other tenant go on", async () => {
    const started = upstream.calls.length;
    for (let i = 0; i < MAX_UPLOADS; i++) stalledUpload('noisy');
    await until(
      'the uploads reach the upstream',
      () => holding('noisy').uploads === MAX_UPLOADS && upstream.calls.length === started + MAX_UPLOADS,
    );

    const before = upstream.calls.length;
    expectRefused(
      await call('POST', '/v1/tenants/noisy/workflows', { 'content-type': 'application/json' }, '{"name":"x","approvers":["bob"]}'),
    );
    expectRefused(await call('PUT', '/v1/tenants/noisy/proxy/workflows/x', { 'content-type': 'application/octet-stream' }, 'bytes'));
    expect(upstream.calls.slice(before)).toEqual([]);

    expect((await call('GET', '/v1/tenants/noisy/workflows')).status).toBe(200);
    expect((await call('GET', '/v1/tenants/calm/workflows')).status).toBe(200);
    const launched = await call(
      'POST',
      '/v1/tenants/calm/workflows',
      { 'content-type': 'application/json' },
      '{"name":"calm","approvers":["bob"]}',
    );
    expect(launched.status).toBe(201);
  });

  it('refuses any call past FACADE_TENANT_MAX_IN_FLIGHT; the other tenant is served, and the bound frees when calls end', async () => {
    const started = upstream.calls.length;
    stalledUpload('noisy');
    const held = [1, 2, 3].map((n) => heldCall('noisy', n));
    await until(
      'the calls are held',
      () => holding('noisy').calls === MAX_CALLS && upstream.holding === 3 && upstream.calls.length === started + 4,
    );

    const before = upstream.calls.length;
    for (const [method, path] of [
      ['GET', '/v1/tenants/noisy/workflows'],
      ['GET', '/v1/tenants/noisy/me'],
      ['GET', '/v1/tenants/noisy/proxy/workflows'],
      ['DELETE', '/v1/tenants/noisy/proxy/webhooks/h1'],
    ]) {
      expectRefused(await call(method, path));
    }
    expect(upstream.calls.slice(before)).toEqual([]);

    // The other tenant: its reads, its own held calls up to its bound, its uploads.
    expect((await call('GET', '/v1/tenants/calm/workflows')).status).toBe(200);
    expect((await call('GET', '/v1/tenants/calm/me')).status).toBe(200);
    const calmHeld = [1, 2].map((n) => heldCall('calm', n));
    await until('calm holds two', () => holding('calm').calls === 2);
    expect((await call('GET', '/v1/tenants/calm/workflows')).status).toBe(200);

    upstream.release();
    expect((await Promise.all([...held, ...calmHeld])).map((a) => a.status)).toEqual([404, 404, 404, 404, 404]);
    for (const req of open.splice(0)) req.destroy();
    await until('noisy holds nothing', () => holding('noisy').calls === 0);
    expect((await call('GET', '/v1/tenants/noisy/workflows')).status).toBe(200);
  });

  it('counts only authenticated calls of the tenant itself: a refused credential is 401, never 429', async () => {
    const held = [1, 2, 3, 4].map((n) => heldCall('noisy', n));
    await until('noisy is at its bound', () => holding('noisy').calls === MAX_CALLS);
    const bad = await call('GET', '/v1/tenants/noisy/workflows', { authorization: 'Bearer cwsk_not-a-real-key-at-all-000000000000' });
    expect(bad.status).toBe(401);
    const calmKey = (await t.request<{ key: string }>('POST', '/v1/tenants/calm/api-keys', { body: {} })).body.key;
    expect((await call('GET', '/v1/tenants/noisy/workflows', { authorization: `Bearer ${calmKey}` })).status).toBe(404);
    expect((await call('GET', '/v1/tenants/calm/workflows', { authorization: `Bearer ${calmKey}` })).status).toBe(200);
    upstream.release();
    await Promise.all(held);
  });

  it('frees a call whose caller went away while the upstream held it', async () => {
    const { hostname, port } = new URL(t.url);
    const gone = httpRequest({
      hostname,
      port,
      path: '/v1/tenants/noisy/workflows/hold-9',
      agent: false,
      headers: { authorization: `Bearer ${t.operatorKey}`, 'x-user-id': 'u-alice' },
    });
    gone.on('error', () => undefined);
    gone.end();
    await until('held', () => holding('noisy').calls === 1 && upstream.holding === 1);
    gone.destroy();
    await until('freed', () => holding('noisy').calls === 0);
    expect(holding('noisy')).toEqual({ calls: 0, uploads: 0 });
  });
});
