import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError } from '../src/common/app-error.js';
import { RoutingService } from '../src/routing/routing.service.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';

const BUDGET = 200;
const WINDOW_MS = 20_000;
/** docs/quotas.md, "The bound": the calls sent within any interval of a window never exceed the budget, whatever the number of instances. */
const OVER_ADMISSION = 0;

interface Outcome {
  lane: Lane;
  outcome: 'sent' | 'refused' | 'upstream_429';
  /** A refusal's Retry-After. */
  retryAfter?: number;
  ms: number;
}
type Lane = 'interactive' | 'agent' | 'background';

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))];
}

/** The most of `times` (ms, sorted or not) within any interval of `lengthMs`. */
function mostWithin(times: number[], lengthMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let from = 0, i = 0; i < sorted.length; i++) {
    while (sorted[from] <= sorted[i] - lengthMs) from++;
    most = Math.max(most, i - from + 1);
  }
  return most;
}

/**
 * Three instances on one database, the sandbox limiting its company to 200 reads in ANY interval of 20 s (it counts
 * a sliding window) and the service's budget set the same (CWS_SANDBOX_QUOTAS): people through the facade (tenant
 * key), agents through RoutingService with lane 'agent', background work through webhook provisioning's list.
 */
describe('one budget per company across three instances', () => {
  const instances: TestApp[] = [];
  let key: string;

  beforeAll(async () => {
    const env = { CWS_SANDBOX_QUOTAS: `read=${BUDGET}/${WINDOW_MS / 1000}s`, LOG_LEVEL: 'warn' };
    const first = await startTestApp({ env, sandbox: { quotas: { read: { calls: BUDGET, windowSeconds: WINDOW_MS / 1000 } } } });
    instances.push(first, await startSecondInstance(first, env), await startSecondInstance(first, env));
    await newTenant(first, 'acme');
    key = (await first.request<{ key: string }>('POST', '/v1/tenants/acme/api-keys', { body: {} })).body.key;
    for (const [as, kind] of [
      ['alice', 'user'],
      ['bob', 'user'],
      ['admin', 'admin'],
    ] as const) {
      const connected = await connectViaHttp(first, 'acme', { kind, as, userId: kind === 'user' ? `u-${as}` : undefined });
      expect(connected.status).toBe('connected');
    }
  }, 60_000);

  afterAll(async () => {
    for (const t of instances.reverse()) await t.close();
  });

  /** One call of `lane` on instance `i`: its outcome as the caller saw it; every refusal must say when to come back. */
  async function call(lane: Lane, i: number): Promise<Outcome> {
    const t = instances[i % instances.length];
    const started = performance.now();
    const done = (outcome: Outcome['outcome'], retryAfter?: number): Outcome => ({
      lane,
      outcome,
      ms: performance.now() - started,
      retryAfter,
    });
    if (lane === 'agent') {
      try {
        const res = await t.app
          .get(RoutingService)
          .call('acme', 'user', 'u-bob', { method: 'GET', path: '/workflows', headers: { accept: 'application/json' }, retry: true, lane });
        await res.body.dump();
        return done(res.status === 429 ? 'upstream_429' : 'sent');
      } catch (e) {
        if (!(e instanceof AppError) || e.code !== 'quota_exhausted') throw e;
        expect(e.retryAfterSeconds).toBeGreaterThanOrEqual(1);
        return done('refused', e.retryAfterSeconds);
      }
    }
    const path = lane === 'interactive' ? '/v1/tenants/acme/workflows' : '/v1/tenants/acme/webhooks';
    const res = await fetch(t.url + path, { headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice' } });
    const body = await res.text();
    if (res.status === 200) return done('sent');
    if (res.status === 429 && JSON.parse(body).error?.code === 'quota_exhausted') {
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      return done('refused', Number(res.headers.get('retry-after')));
    }
    if (res.status === 429 || res.headers.get('x-upstream-status') === '429') return done('upstream_429');
    throw new Error(`${lane} call answered ${res.status}: ${body}`);
  }

  /** `demand` calls a second per lane for `driveMs`, each on the next instance in turn. */
  async function drive(demand: Partial<Record<Lane, number>>, driveMs: number): Promise<Outcome[]> {
    const outcomes: Array<Promise<Outcome>> = [];
    const sent: Record<Lane, number> = { interactive: 0, agent: 0, background: 0 };
    const start = Date.now();
    for (let ms = 0; ms < driveMs; ms += 50) {
      for (const [lane, perSecond] of Object.entries(demand) as Array<[Lane, number]>) {
        while (sent[lane] < Math.floor(((ms + 50) * perSecond) / 1000)) outcomes.push(call(lane, sent[lane]++));
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + ms + 50 - Date.now())));
    }
    return Promise.all(outcomes);
  }

  const of = (results: Outcome[], lane: Lane, outcome: Outcome['outcome']) =>
    results.filter((r) => r.lane === lane && r.outcome === outcome).length;

  it('at three times the budget for two whole windows: no interval of a window sees more than the budget, at least 80 % of it used, people never refused', async () => {
    const sandbox = instances[0].sandbox!;
    sandbox.clearRecords();
    // Idle: people alone (part of the budget too).
    const idle: number[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await call('interactive', i);
      expect(r.outcome).toBe('sent');
      idle.push(r.ms);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const driveStart = Date.now();
    // 30 a second in all, three times the budget's 10; past two boundaries of any 20 s window.
    const results = await drive({ interactive: 6, agent: 15, background: 9 }, 2 * WINDOW_MS + 5000);
    const driveEnd = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1500)); // every instance saves its figures each second

    const share = (lane: Lane) => of(results, lane, 'refused') / results.filter((r) => r.lane === lane).length;
    const upstream = sandbox.records().filter((r) => r.path === '/workflows' || r.path === '/webhooks');
    const upstream429 = upstream.filter((r) => r.status === 429).length;
    const most = mostWithin(
      upstream.map((r) => r.at),
      WINDOW_MS,
    );
    // The budget used: what reached the upstream in the two windows that end with the drive, against two budgets.
    const used = upstream.filter((r) => r.at > driveEnd - 2 * WINDOW_MS && r.at >= driveStart).length / (2 * BUDGET);
    const interactiveLoad = results.filter((r) => r.lane === 'interactive').map((r) => r.ms);
    console.log(
      `3 instances, budget ${BUDGET}/${WINDOW_MS / 1000}s counted in any interval, ${results.length} calls in ${(driveEnd - driveStart) / 1000} s (3x): ` +
        `most in any ${WINDOW_MS / 1000} s ${most} (over-admission ${Math.max(0, most - BUDGET)}), budget used ${(used * 100).toFixed(1)} %, upstream 429s ${upstream429}; ` +
        `refused: interactive ${of(results, 'interactive', 'refused')}, agent ${of(results, 'agent', 'refused')} (${(share('agent') * 100).toFixed(0)} %), background ${of(results, 'background', 'refused')} (${(share('background') * 100).toFixed(0)} %); ` +
        `interactive p95 idle ${p95(idle).toFixed(1)} ms, under load ${p95(interactiveLoad).toFixed(1)} ms; ` +
        `people refused after (ms) / Retry-After (s): ${JSON.stringify(results.filter((r) => r.lane === 'interactive' && r.outcome === 'refused').map((r) => [Math.round(r.ms), r.retryAfter]))}`,
    );

    expect(upstream429).toBe(0);
    expect(most).toBeLessThanOrEqual(BUDGET + OVER_ADMISSION);
    expect(used).toBeGreaterThanOrEqual(0.8);
    // People are never refused (their 6 a second fit the budget); agents are refused before them, background work first.
    expect(of(results, 'interactive', 'refused')).toBe(0);
    expect(of(results, 'agent', 'refused')).toBeGreaterThan(0);
    expect(share('background')).toBeGreaterThanOrEqual(share('agent'));

    // What the instances counted is what the upstream saw: /metrics (each instance's) and the tenant (all of them).
    const counted = async (outcome: string, lane = '\\w+') => {
      let n = 0;
      for (const t of instances) {
        const text = (await t.request('GET', '/metrics', { key: null })).text;
        for (const m of text.matchAll(
          new RegExp(`^cws_quota_calls_total\\{class="read",lane="${lane}",outcome="${outcome}"\\} (\\d+)`, 'gm'),
        ))
          n += Number(m[1]);
      }
      return n;
    };
    console.log(
      `interactive calls that waited for budget: ${await counted('waited', 'interactive')} of ${interactiveLoad.length + idle.length}`,
    );
    expect(await counted('spent')).toBe(upstream.length);
    expect(await counted('refused')).toBe(results.filter((r) => r.outcome === 'refused').length);
    const tenant = await instances[1].request<{
      quotaUsage: { read: Record<string, { start: string; spent: number; refused: number } | string> };
    }>('GET', '/v1/tenants/acme');
    expect(tenant.body.quotaUsage.read.budget).toBe(`${BUDGET}/20s`);
  }, 150_000);

  it('people strictly first: people at half the budget, agents at twice it, for one and a half windows: people served, agents at the rate left', async () => {
    const sandbox = instances[0].sandbox!;
    // A fresh log: what the first run spent has left every interval.
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 2000));
    sandbox.clearRecords();
    const results = await drive({ interactive: (0.5 * BUDGET * 1000) / WINDOW_MS, agent: (2 * BUDGET * 1000) / WINDOW_MS }, 30_000);
    const upstream = sandbox.records().filter((r) => r.path === '/workflows');
    const people = results.filter((r) => r.lane === 'interactive');
    const agentsSent = of(results, 'agent', 'sent');
    console.log(
      `people first, 3 instances, ${BUDGET}/${WINDOW_MS / 1000}s: people ${of(results, 'interactive', 'sent')} of ${people.length} served, ` +
        `agents ${agentsSent} of ${results.length - people.length} (${((agentsSent * WINDOW_MS) / 30_000 / BUDGET).toFixed(2)} of the budget a window), ` +
        `people refused after (ms) / Retry-After (s): ${JSON.stringify(people.filter((r) => r.outcome === 'refused').map((r) => [Math.round(r.ms), r.retryAfter]))}, ` +
        `upstream 429s ${upstream.filter((r) => r.status === 429).length}, most in any window ${mostWithin(
          upstream.map((r) => r.at),
          WINDOW_MS,
        )}`,
    );
    expect(of(results, 'interactive', 'sent') / people.length).toBeGreaterThanOrEqual(0.999);
    expect(upstream.filter((r) => r.status === 429)).toHaveLength(0);
    // Agents get what people leave, less people's headroom (docs/quotas.md, "Lanes"): a fifth of the budget a window at least.
    expect((agentsSent * WINDOW_MS) / 30_000).toBeGreaterThanOrEqual(0.2 * BUDGET);
  }, 120_000);
});
