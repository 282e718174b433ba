import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MetricsAccess } from '../../src/ops/metrics-access.js';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type HttpAnswer, type TestApp } from '../support/test-app.js';
import { expectError, newReceiver } from './support.js';

/**
 * What an anonymous visitor learns and what every answer carries (docs/security.md, "Metrics" and "Security
 * headers"): the usual security headers on Express's, the facade's and the receiver's answers alike, without
 * touching a pass-through answer's own headers; /metrics open outside production as before, closed in
 * production unless METRICS_TOKEN or METRICS_PORT opens it.
 */

const TOKEN = 'metrics-token-0123456789abcdef';

function expectSecurityHeaders(res: HttpAnswer<unknown>, label: string): void {
  expect([
    label,
    res.headers.get('x-content-type-options'),
    res.headers.get('referrer-policy'),
    res.headers.get('x-frame-options'),
    res.headers.get('strict-transport-security'),
  ]).toEqual([label, 'nosniff', 'no-referrer', 'SAMEORIGIN', expect.stringMatching(/^max-age=\d+/)]);
  expect(res.headers.get('x-powered-by')).toBeNull();
}

describe('outside production', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ env: { LOG_LEVEL: 'warn' } });
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('every kind of answer carries the security headers', async () => {
    expectSecurityHeaders(await t.request('GET', '/health/live', { key: null }), 'health');
    expectSecurityHeaders(await t.request('GET', '/v1/tenants'), 'operator JSON');
    expectSecurityHeaders(await t.request('GET', '/v1/tenants', { key: null }), 'a 401 before the body');
    expectSecurityHeaders(await t.request('GET', '/nowhere', { key: null }), "Express's 404");
    expectSecurityHeaders(await t.request('GET', '/v1/tenants/acme/workflows', { key: null }), "the facade's 401");
    const receiver = await newReceiver(t, 'acme');
    expectSecurityHeaders(await t.request('POST', receiver.path, { key: null, body: {} }), "the receiver's 401");
  });

  it("a facade answer passed through from the upstream keeps the upstream's content type, and gets nosniff", async () => {
    const res = await t.request('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-alice' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-upstream-status')).toBe('200');
    const upstream = await fetch(`${t.sandbox!.url}/workflows`, { headers: { authorization: 'Bearer nope' } });
    expect(res.headers.get('content-type')).toBe(upstream.headers.get('content-type') ?? res.headers.get('content-type'));
    expectSecurityHeaders(res, 'pass-through');
  });

  it('/metrics is open, as before', async () => {
    const res = await t.request('GET', '/metrics', { key: null });
    expect(res.status).toBe(200);
    expect(res.text).toContain('process_cpu_seconds_total');
  });
});

describe('/metrics in production', () => {
  const apps: TestApp[] = [];
  const start = async (env: Record<string, string>) => {
    const t = await startTestApp({ sandbox: false, env: { NODE_ENV: 'production', PORT: '0', LOG_LEVEL: 'warn', ...env } });
    apps.push(t);
    return t;
  };
  afterAll(async () => {
    for (const t of apps) await t.close();
  });

  it('is not served without METRICS_TOKEN or METRICS_PORT', async () => {
    const t = await start({});
    expectError(await t.request('GET', '/metrics', { key: null }), 404, 'route_not_found', 'anonymous');
    expectError(await t.request('GET', '/metrics'), 404, 'route_not_found', 'even with the operator key');
  });

  it('with METRICS_TOKEN: only to that bearer', async () => {
    const t = await start({ METRICS_TOKEN: TOKEN });
    expectError(await t.request('GET', '/metrics', { key: null }), 401, 'unauthorized', 'anonymous');
    expectError(await t.request('GET', '/metrics', { key: `${TOKEN}x` }), 401, 'unauthorized', 'a wrong token');
    expectError(await t.request('GET', '/metrics'), 401, 'unauthorized', 'the operator key');
    const res = await t.request('GET', '/metrics', { key: TOKEN });
    expect([res.status, res.text.includes('process_cpu_seconds_total')]).toEqual([200, true]);
  });

  it('with METRICS_PORT: on that port only (with the token when one is set)', async () => {
    const t = await start({ METRICS_PORT: '0', METRICS_HOST: '127.0.0.1', METRICS_TOKEN: TOKEN });
    expectError(await t.request('GET', '/metrics', { key: TOKEN }), 404, 'route_not_found', 'the service port');
    const port = t.app.get(MetricsAccess).port();
    expect(port).not.toBeNull();
    const url = `http://127.0.0.1:${port}`;
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
    const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect([res.status, (await res.text()).includes('process_cpu_seconds_total')]).toEqual([200, true]);
    expect((await fetch(`${url}/v1/tenants`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });
});
