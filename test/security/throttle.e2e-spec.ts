import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Clock } from '../../src/common/clock.js';
import { newTenant } from '../support/connect.js';
import { startTestApp, type HttpAnswer, type TestApp } from '../support/test-app.js';
import { expectError, newTenantKey } from './support.js';

/**
 * Guessing credentials (docs/security.md, "Credential guessing"): failed console sign-ins are throttled per
 * client and overall, failed API keys per client, with `429 too_many_requests` and Retry-After. A client locked
 * out of sign-in is refused before its key is checked (even a right one); on the API only its wrong credentials
 * are refused, a right one passes. Other clients are not touched, and the window's end lets it in again.
 * Clients are told apart by address (X-Forwarded-For from a proxy on this host: TRUST_PROXY's default).
 * Floods, proxies and several instances: throttle-flood.e2e-spec.ts, throttle-cluster.e2e-spec.ts.
 */

class ShiftedClock extends Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}

const WINDOW_MS = 60_000;

describe('throttling failed credentials', () => {
  let t: TestApp;
  let tenantKey: string;
  const clock = new ShiftedClock();

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      env: {
        SIGN_IN_MAX_FAILURES_PER_CLIENT: '5',
        SIGN_IN_MAX_FAILURES: '8',
        API_KEY_MAX_FAILURES_PER_CLIENT: '6',
        AUTH_FAILURE_WINDOW_MS: String(WINDOW_MS),
        LOG_LEVEL: 'warn',
      },
    });
    await newTenant(t, 'acme');
    tenantKey = await newTenantKey(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  const from = (client: string) => ({ 'x-forwarded-for': client });
  const signIn = (operatorKey: string, client: string) =>
    t.request('POST', '/console/api/session', { key: null, body: { operatorKey }, headers: from(client) });

  function expectThrottled(res: HttpAnswer<unknown>, label: string): void {
    expectError(res, 429, 'too_many_requests', label);
    const wait = Number(res.headers.get('retry-after'));
    expect([label, wait >= 1 && wait <= WINDOW_MS / 1000]).toEqual([label, true]);
  }

  it('console sign-in: per client, then overall, then open again after the window', async () => {
    for (let i = 0; i < 5; i++) expectError(await signIn(`wrong-${i}`, '198.51.100.1'), 401, 'unauthorized', `guess ${i}`);
    expectThrottled(await signIn('wrong-5', '198.51.100.1'), 'sixth guess');
    expectThrottled(await signIn(t.operatorKey, '198.51.100.1'), 'the right key from the throttled client');
    // Another client has its own count, until all clients together reach the overall bound (8).
    for (let i = 0; i < 3; i++) expectError(await signIn(`other-${i}`, '198.51.100.2'), 401, 'unauthorized', `other ${i}`);
    expectThrottled(await signIn(t.operatorKey, '198.51.100.3'), 'a third client, past the overall bound');
    clock.offsetMs += WINDOW_MS;
    expect((await signIn(t.operatorKey, '198.51.100.1')).status).toBe(201);
  });

  it('a flood of wrong tenant keys is throttled per client, on Nest routes and facade routes alike', async () => {
    clock.offsetMs += WINDOW_MS;
    const wrong = 'cwsk_wrongwrongwrongwrongwrongwrongwrongwrong';
    const client = '203.0.113.7';
    for (let i = 0; i < 3; i++)
      expectError(
        await t.request('GET', '/v1/tenants/acme/connections', { key: wrong, headers: from(client) }),
        401,
        'unauthorized',
        `nest ${i}`,
      );
    for (let i = 0; i < 3; i++)
      expectError(
        await t.request('GET', '/v1/tenants/acme/workflows', { key: wrong, headers: from(client) }),
        401,
        'unauthorized',
        `facade ${i}`,
      );
    expectThrottled(await t.request('GET', '/v1/tenants/acme/connections', { key: wrong, headers: from(client) }), 'nest, throttled');
    expectThrottled(await t.request('GET', '/v1/tenants/acme/workflows', { key: wrong, headers: from(client) }), 'facade, throttled');
    // A right key from the throttled client still passes, on both kinds of route (its wrong ones alone are refused).
    expect((await t.request('GET', '/v1/tenants/acme/connections', { key: tenantKey, headers: from(client) })).status).toBe(200);
    expectError(
      await t.request('GET', '/v1/tenants/acme/workflows', { key: tenantKey, headers: from(client) }),
      400,
      'user_id_required',
      'facade, right key: past the credential',
    );
    expectThrottled(
      await t.request('POST', '/v1/tenants/acme/connect-sessions', { key: null, body: {}, headers: from(client) }),
      'no key at all',
    );
    // Another client with its key is served; a refused tenant (404) is no guess and is not counted.
    expect((await t.request('GET', '/v1/tenants/acme/connections', { key: tenantKey, headers: from('203.0.113.8') })).status).toBe(200);
    for (let i = 0; i < 8; i++)
      expectError(
        await t.request('GET', '/v1/tenants/other/connections', { key: tenantKey, headers: from('203.0.113.9') }),
        404,
        'tenant_not_found',
        `other tenant ${i}`,
      );
    clock.offsetMs += WINDOW_MS;
    expect((await t.request('GET', '/v1/tenants/acme/connections', { key: tenantKey, headers: from(client) })).status).toBe(200);
  });

  it('an IPv6 client is counted by its /64', async () => {
    clock.offsetMs += WINDOW_MS;
    for (let i = 0; i < 5; i++) expectError(await signIn('wrong', `2001:db8:1:2::${i + 1}`), 401, 'unauthorized', `v6 ${i}`);
    expectThrottled(await signIn('wrong', '2001:db8:1:2:ffff::9'), 'another address of the same /64');
  });
});
