import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FailureCounts } from '../../src/auth/failure-counts.js';
import { Clock } from '../../src/common/clock.js';
import { newTenant } from '../support/connect.js';
import { startSecondInstance, startTestApp, type HttpAnswer, type TestApp } from '../support/test-app.js';
import { count, expectError, newTenantKey } from './support.js';

/**
 * The throttle's counts are shared by every instance and kept across a restart (docs/security.md, "Credential
 * guessing"): two instances on one database reach a client's bound once between them, not once each; an instance
 * learns of a client past its bound from the other's writes; a restarted instance knows it at once; the overall
 * bound on sign-ins is shared too; the table's rows go with their window.
 */

class ShiftedClock extends Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}

const BOUND = 20;
const WINDOW_MS = 600_000;
const env = {
  API_KEY_MAX_FAILURES_PER_CLIENT: String(BOUND),
  SIGN_IN_MAX_FAILURES_PER_CLIENT: '10',
  SIGN_IN_MAX_FAILURES: '4',
  AUTH_FAILURE_WINDOW_MS: String(WINDOW_MS),
  LOG_LEVEL: 'error',
};

const wrongKey = () => `cwsk_${randomBytes(32).toString('base64url')}`;
const from = (client: string) => ({ 'x-forwarded-for': client });
const counts = (t: TestApp) => t.app.get(FailureCounts);

async function wrongCalls(t: TestApp, client: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++)
    out.push((await t.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: from(client) })).status);
  return out;
}

/** Polls `done` every 50 ms (no request is sent, nothing counted) until it holds or `timeoutMs` passes. */
async function eventually(done: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await done()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return done();
}

function expectThrottled(res: HttpAnswer<unknown>, label: string): void {
  expectError(res, 429, 'too_many_requests', label);
  const wait = Number(res.headers.get('retry-after'));
  expect([label, wait >= 1 && wait <= WINDOW_MS / 1000]).toEqual([label, true]);
}

describe('failure counts shared by two instances on one database', () => {
  let a: TestApp;
  let b: TestApp;
  let key: string;
  const clock = new ShiftedClock();

  beforeAll(async () => {
    a = await startTestApp({ env, clock });
    b = await startSecondInstance(a, env);
    await newTenant(a, 'acme');
    key = await newTenantKey(a, 'acme');
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('reaches the bound once across both: half the failures on each, then both refuse the wrong keys and pass the right one', async () => {
    const client = '198.51.100.7';
    expect(await wrongCalls(a, client, BOUND / 2)).toEqual(Array(BOUND / 2).fill(401));
    await counts(a).flushNow();
    expect(await wrongCalls(b, client, BOUND / 2)).toEqual(Array(BOUND / 2).fill(401));
    await counts(b).flushNow();
    await counts(a).flushNow(); // reads what b wrote
    for (const [name, t] of [
      ['a', a],
      ['b', b],
    ] as const) {
      expectThrottled(
        await t.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: from(client) }),
        `${name}: past the shared bound`,
      );
      expect((await t.request('GET', '/v1/tenants/acme/connections', { key, headers: from(client) })).status).toBe(200);
    }
    expect(await count(a, `SELECT 1 FROM auth_failures WHERE kind = 'api_key' AND client = $1 AND failures = $2`, [client, BOUND])).toBe(1);
  });

  it('learns of a client past its bound on the other instance by its own flushes, with no request of that client', async () => {
    const client = '198.51.100.8';
    expect(await wrongCalls(a, client, BOUND)).toEqual(Array(BOUND).fill(401));
    expect(await eventually(() => counts(b).waitFor('api_key', client) > 0)).toBe(true);
    expectThrottled(await b.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: from(client) }), 'b, told by a');
  });

  it('a restarted instance knows the clients past their bound from its first flush', async () => {
    const client = '198.51.100.9';
    expect(await wrongCalls(b, client, BOUND)).toEqual(Array(BOUND).fill(401));
    await b.close();
    // b's last failures were written at shutdown; a new instance reads the counts of the window with its first flush.
    b = await startSecondInstance(a, env);
    await counts(b).flushNow();
    expectThrottled(
      await b.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: from(client) }),
      'after the restart',
    );
    expect((await b.request('GET', '/v1/tenants/acme/connections', { key, headers: from(client) })).status).toBe(200);
  }, 60_000);

  it('shares the overall bound on sign-ins, which leaves the API alone', async () => {
    const signIn = (t: TestApp, client: string, operatorKey: string) =>
      t.request('POST', '/console/api/session', { key: null, body: { operatorKey }, headers: from(client) });
    for (const [t, client] of [
      [a, '192.0.2.1'],
      [a, '192.0.2.1'],
      [b, '192.0.2.2'],
      [b, '192.0.2.2'],
    ] as const)
      expectError(await signIn(t, client, `wrong-${'x'.repeat(32)}`), 401, 'unauthorized', `guess from ${client}`);
    await counts(b).flushNow();
    await counts(a).flushNow();
    expectThrottled(await signIn(a, '192.0.2.3', a.operatorKey), 'a third client at a, past the overall bound');
    expect((await a.request('GET', '/v1/tenants', { headers: from('192.0.2.3') })).status).toBe(200);
  });

  it('removes the rows whose window has ended', async () => {
    expect(await count(a, 'SELECT 1 FROM auth_failures')).toBeGreaterThan(0);
    clock.offsetMs += WINDOW_MS + 60_000;
    await counts(a).flushNow();
    expect(await count(a, 'SELECT 1 FROM auth_failures')).toBe(0);
  });
});
