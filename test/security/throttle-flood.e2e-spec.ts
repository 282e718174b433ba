import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type HttpAnswer, type TestApp } from '../support/test-app.js';
import { expectError, newTenantKey } from './support.js';

/**
 * A flood of wrong keys costs the right callers beside it nothing (docs/security.md, "Credential guessing"):
 * 1,000 wrong keys from one client, through a proxy on this host that TRUST_PROXY names, while a tenant key, the
 * operator key and a console session keep calling from the same client: none of their calls fails, the flood's
 * failures past the bound are all `429` with Retry-After. A locked console sign-in stops neither the API nor an
 * open session; and an X-Forwarded-For from a socket that is no trusted proxy is ignored.
 */

const BOUND = 50;
const WINDOW_MS = 600_000;
const FLOOD = 1000;
const FLOOD_CONCURRENCY = 16;

interface Call {
  label: string;
  send: () => Promise<HttpAnswer<unknown>>;
  expected: number;
}

interface Timed {
  label: string;
  status: number;
  ms: number;
}

const wrongKey = () => `cwsk_${randomBytes(32).toString('base64url')}`;

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)];
}

async function timed(call: Call): Promise<Timed> {
  const started = performance.now();
  const res = await call.send();
  return { label: call.label, status: res.status, ms: performance.now() - started };
}

/** `n` requests, `concurrency` at a time. */
async function inParallel<T>(n: number, concurrency: number, send: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await send(i);
      }
    }),
  );
  return out;
}

/** One answer of the flood: its status, Retry-After and error code. */
interface FloodAnswer {
  status: number;
  retryAfter: string | null;
  code: string | null;
}

// The flood, from a process of its own (as an attacker's would be): in this one it would share the event loop
// with the right callers' own client and delay their timings for reasons that are not the server's. It prints
// `throttled` at its first 429, then every answer as one JSON line at the end.
const FLOOD_SCRIPT = `
const { randomBytes } = await import('node:crypto');
const [url, n, concurrency, client] = process.argv.slice(1);
const answers = [];
let next = 0;
let told = false;
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (next < Number(n)) {
    const i = next++;
    const res = await fetch(url + (i % 2 === 0 ? '/v1/tenants/acme/connections' : '/v1/tenants/acme/workflows'), {
      headers: { authorization: 'Bearer cwsk_' + randomBytes(32).toString('base64url'), 'x-forwarded-for': client },
    });
    const body = await res.json().catch(() => null);
    answers[i] = { status: res.status, retryAfter: res.headers.get('retry-after'), code: body?.error?.code ?? null };
    if (res.status === 429 && !told) { told = true; process.stdout.write('throttled\\n'); }
  }
}));
process.stdout.write(JSON.stringify(answers) + '\\n');
`;

function floodFrom(url: string, client: string, onThrottled: () => void): Promise<FloodAnswer[]> {
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', FLOOD_SCRIPT, url, String(FLOOD), String(FLOOD_CONCURRENCY), client],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('throttled')) onThrottled();
  });
  return new Promise((resolve, reject) =>
    child.on('close', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !last.startsWith('[')) return reject(new Error(`the flood ended with ${code}: ${out.slice(-500)}`));
      resolve(JSON.parse(last) as FloodAnswer[]);
    }),
  );
}

/** Every answer but the 401s is a 429 too_many_requests with a Retry-After within the window. */
function expectAllThrottled(answers: FloodAnswer[], label: string): void {
  const wrong = answers.filter((a) => {
    if (a.status === 401) return false;
    const wait = Number(a.retryAfter);
    return a.status !== 429 || a.code !== 'too_many_requests' || !(wait >= 1 && wait <= WINDOW_MS / 1000);
  });
  expect([label, wrong.map((a) => `${a.status} ${a.code} ${a.retryAfter}`)]).toEqual([label, []]);
}

const answerOf = (res: HttpAnswer<unknown>): FloodAnswer => ({
  status: res.status,
  retryAfter: res.headers.get('retry-after'),
  code: (res.body as { error?: { code?: string } } | undefined)?.error?.code ?? null,
});

describe('a flood of wrong keys through a trusted proxy', () => {
  let t: TestApp;
  let acmeKey: string;
  let betaKey: string;
  let session: { cookie: string; csrf: string };
  const flooder = '198.51.100.77';
  const from = (client: string) => ({ 'x-forwarded-for': client });

  beforeAll(async () => {
    t = await startTestApp({
      env: {
        TRUST_PROXY: 'loopback',
        API_KEY_MAX_FAILURES_PER_CLIENT: String(BOUND),
        SIGN_IN_MAX_FAILURES_PER_CLIENT: '3',
        AUTH_FAILURE_WINDOW_MS: String(WINDOW_MS),
        LOG_LEVEL: 'error',
      },
    });
    await newTenant(t, 'acme');
    await newTenant(t, 'beta');
    acmeKey = await newTenantKey(t, 'acme');
    betaKey = await newTenantKey(t, 'beta');
    await connectViaHttp(t, 'beta', { userId: 'u-alice', as: 'alice' });
    const signIn = await t.request<{ csrfToken: string }>('POST', '/console/api/session', {
      key: null,
      body: { operatorKey: t.operatorKey },
      headers: from(flooder),
    });
    expect(signIn.status).toBe(201);
    session = { cookie: (signIn.headers.get('set-cookie') ?? '').split(';')[0], csrf: signIn.body.csrfToken };
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  /** The right callers, all from the flooder's address: another tenant's facade call, a Nest route, the operator, the console. */
  function rightCalls(): Call[] {
    const headers = from(flooder);
    return [
      {
        label: 'beta facade',
        expected: 200,
        send: () => t.request('GET', '/v1/tenants/beta/workflows', { key: betaKey, headers: { ...headers, 'x-user-id': 'u-alice' } }),
      },
      { label: 'acme Nest route', expected: 200, send: () => t.request('GET', '/v1/tenants/acme/connections', { key: acmeKey, headers }) },
      { label: 'operator', expected: 200, send: () => t.request('GET', '/v1/tenants', { headers }) },
      {
        label: 'console session',
        expected: 200,
        send: () =>
          t.request('GET', '/v1/tenants', { key: null, headers: { ...headers, cookie: session.cookie, 'x-csrf-token': session.csrf } }),
      },
    ];
  }

  async function callRight(until: () => boolean, atLeast: number): Promise<Timed[]> {
    const calls = rightCalls();
    const out: Timed[] = [];
    while (out.length < atLeast || !until()) out.push(await timed(calls[out.length % calls.length]));
    return out;
  }

  const failuresOf = (answers: Timed[], calls: Call[]) =>
    answers.filter((a) => a.status !== calls.find((c) => c.label === a.label)?.expected).map((a) => `${a.label}: ${a.status}`);

  it('answers the flood 429 past the bound and fails none of the right calls from the same client', async () => {
    const before = await callRight(() => true, 80);
    expect(failuresOf(before, rightCalls())).toEqual([]);

    let floodDone = false;
    let throttled = false;
    const flood = floodFrom(t.url, flooder, () => {
      throttled = true;
    }).finally(() => {
      floodDone = true;
    });
    const during = callRight(() => floodDone, 40);

    // Once the client is past its bound: the operator creates a tenant and a key, whose first call (not cached yet) passes.
    while (!throttled && !floodDone) await new Promise((r) => setTimeout(r, 5));
    expect(throttled).toBe(true);
    const created = await t.request('POST', '/v1/tenants', {
      body: { id: 'gamma', name: 'gamma', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
      headers: from(flooder),
    });
    expect(created.status).toBe(201);
    const fresh = await t.request<{ key: string }>('POST', '/v1/tenants/gamma/api-keys', { body: {}, headers: from(flooder) });
    expect(fresh.status).toBe(201);
    const firstUse = await t.request('GET', '/v1/tenants/gamma/connections', { key: fresh.body.key, headers: from(flooder) });
    expect(firstUse.status).toBe(200);

    const [answers, duringCalls] = await Promise.all([flood, during]);
    expect(failuresOf(duringCalls, rightCalls())).toEqual([]);
    expect(answers.filter((a) => a.status === 401)).toHaveLength(BOUND);
    expectAllThrottled(answers, 'the flood past its bound');

    const ratio = p95(duringCalls.map((c) => c.ms)) / p95(before.map((c) => c.ms));
    console.log(
      `right calls from the flooding client: p95 ${p95(before.map((c) => c.ms)).toFixed(1)} ms before, ` +
        `${p95(duringCalls.map((c) => c.ms)).toFixed(1)} ms during ${FLOOD} wrong keys (${duringCalls.length} calls): ` +
        `ratio ${ratio.toFixed(2)} (measured on a loaded machine; not asserted)`,
    );

    // Another client has a count of its own; the flooder's right key still passes, its wrong one is still refused.
    expectError(
      await t.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: from('198.51.100.78') }),
      401,
      'unauthorized',
      'another client',
    );
    expect((await t.request('GET', '/v1/tenants/acme/connections', { key: acmeKey, headers: from(flooder) })).status).toBe(200);
    expectError(
      await t.request('GET', '/v1/tenants/acme/connections', { key: null, headers: from(flooder) }),
      429,
      'too_many_requests',
      'no key',
    );
  }, 180_000);

  it('a locked console sign-in stops neither the API nor an open session', async () => {
    const client = '198.51.100.90';
    const signIn = (operatorKey: string) =>
      t.request('POST', '/console/api/session', { key: null, body: { operatorKey }, headers: from(client) });
    const open = await signIn(t.operatorKey);
    expect(open.status).toBe(201);
    const cookie = (open.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = (open.body as { csrfToken: string }).csrfToken;
    for (let i = 0; i < 3; i++) expectError(await signIn(`wrong-${i}-${'x'.repeat(32)}`), 401, 'unauthorized', `guess ${i}`);
    expectError(await signIn(t.operatorKey), 429, 'too_many_requests', 'the right key at a locked sign-in');
    expect((await t.request('GET', '/v1/tenants', { headers: from(client) })).status).toBe(200);
    const withSession = { key: null, headers: { ...from(client), cookie, 'x-csrf-token': csrf } };
    expect((await t.request('GET', '/v1/tenants', withSession)).status).toBe(200);
    expect((await t.request('GET', '/console/api/figures', withSession)).status).toBe(200);
  });
});

describe('X-Forwarded-For from a socket that is no trusted proxy', () => {
  let t: TestApp;
  let key: string;

  beforeAll(async () => {
    // The tests connect from loopback, which this TRUST_PROXY does not name: their sockets are clients, not proxies.
    t = await startTestApp({
      env: {
        TRUST_PROXY: '10.0.0.0/8',
        API_KEY_MAX_FAILURES_PER_CLIENT: '20',
        AUTH_FAILURE_WINDOW_MS: String(WINDOW_MS),
        LOG_LEVEL: 'error',
      },
    });
    await newTenant(t, 'acme');
    key = await newTenantKey(t, 'acme');
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it('is ignored: a new address in every request does not reset the count, and the right key beside it passes', async () => {
    const spoofed = () => ({ 'x-forwarded-for': `203.0.113.${1 + Math.floor(Math.random() * 250)}, 10.1.2.3` });
    let done = false;
    const flood = inParallel(200, 8, async () =>
      answerOf(await t.request('GET', '/v1/tenants/acme/connections', { key: wrongKey(), headers: spoofed() })),
    ).finally(() => {
      done = true;
    });
    const right: number[] = [];
    while (!done || right.length < 20) {
      const headers = right.length % 2 === 0 ? spoofed() : {};
      right.push((await t.request('GET', '/v1/tenants/acme/connections', { key, headers })).status);
    }
    const answers = await flood;
    expect(right.filter((status) => status !== 200)).toEqual([]);
    expect(answers.filter((a) => a.status === 401)).toHaveLength(20);
    expectAllThrottled(answers, 'spoofed addresses');
  });
});
