import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError } from '../src/common/app-error.js';
import { RoutingService } from '../src/routing/routing.service.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';

const BUDGET = 400;
const WINDOW_MS = 60_000;
/** docs/quotas.md, "The bound": calls sent in a window never exceed the budget, whatever the number of instances. */
const OVER_ADMISSION = 0;
const DRIVE_MS = WINDOW_MS;
/** Calls per second per lane: 20 a second in all, three times the budget's 400 a minute. */
const DEMAND = { interactive: 4, agent: 10, background: 6 } as const;
type Lane = keyof typeof DEMAND;

interface Outcome {
  lane: Lane;
  outcome: 'sent' | 'refused' | 'upstream_429';
  ms: number;
}

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))];
}

/**
 * Three instances on one database, the sandbox limiting its company to 400 reads a minute and the service's budget
 * set the same (CWS_SANDBOX_QUOTAS), driven at three times that for a whole window from every lane: people through
 * the facade (tenant key), agents through RoutingService with lane 'agent' (the MCP door is not on this branch),
 * background work through webhook provisioning's list (lane 'background').
 */
describe('one budget per company across three instances', () => {
  const instances: TestApp[] = [];
  let key: string;

  beforeAll(async () => {
    const env = { CWS_SANDBOX_QUOTAS: `read=${BUDGET}/60s`, LOG_LEVEL: 'warn' };
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
    const done = (outcome: Outcome['outcome']): Outcome => ({ lane, outcome, ms: performance.now() - started });
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
        return done('refused');
      }
    }
    const path = lane === 'interactive' ? '/v1/tenants/acme/workflows' : '/v1/tenants/acme/webhooks';
    const res = await fetch(t.url + path, { headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice' } });
    const body = await res.text();
    if (res.status === 200) return done('sent');
    if (res.status === 429 && JSON.parse(body).error?.code === 'quota_exhausted') {
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      return done('refused');
    }
    if (res.status === 429 || res.headers.get('x-upstream-status') === '429') return done('upstream_429');
    throw new Error(`${lane} call answered ${res.status}: ${body}`);
  }

  it('at three times the budget for a whole window: no more than the budget sent, people never refused, agents before them', async () => {
    const sandbox = instances[0].sandbox!;
    sandbox.clearRecords();
    // Idle: people alone (part of the budget too).
    const idle: number[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await call('interactive', i);
      expect(r.outcome).toBe('sent');
      idle.push(r.ms);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }

    const outcomes: Array<Promise<Outcome>> = [];
    const sent = { interactive: 0, agent: 0, background: 0 };
    const start = Date.now();
    for (let ms = 0; ms < DRIVE_MS; ms += 50) {
      for (const lane of Object.keys(DEMAND) as Lane[]) {
        while (sent[lane] < Math.floor(((ms + 50) * DEMAND[lane]) / 1000)) outcomes.push(call(lane, sent[lane]++));
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + ms + 50 - Date.now())));
    }
    const results = await Promise.all(outcomes);
    await new Promise((resolve) => setTimeout(resolve, 1500)); // every instance saves its figures each second

    const of = (lane: Lane, outcome: Outcome['outcome']) => results.filter((r) => r.lane === lane && r.outcome === outcome).length;
    const share = (lane: Lane) => of(lane, 'refused') / results.filter((r) => r.lane === lane).length;
    const upstream = sandbox.records().filter((r) => r.path === '/workflows' || r.path === '/webhooks');
    const perWindow = new Map<number, number>();
    for (const r of upstream) perWindow.set(Math.floor(r.at / WINDOW_MS), (perWindow.get(Math.floor(r.at / WINDOW_MS)) ?? 0) + 1);
    const upstream429 = upstream.filter((r) => r.status === 429).length;
    const interactiveLoad = results.filter((r) => r.lane === 'interactive').map((r) => r.ms);
    console.log(
      `3 instances, budget ${BUDGET}/60s, ${results.length} calls in ${DRIVE_MS / 1000} s (3x): sent upstream per window ${JSON.stringify([...perWindow.values()])}, upstream 429s ${upstream429}; ` +
        `refused: interactive ${of('interactive', 'refused')}, agent ${of('agent', 'refused')} (${(share('agent') * 100).toFixed(0)} %), background ${of('background', 'refused')} (${(share('background') * 100).toFixed(0)} %); ` +
        `interactive p95 idle ${p95(idle).toFixed(1)} ms, under load ${p95(interactiveLoad).toFixed(1)} ms: ratio ${(p95(interactiveLoad) / p95(idle)).toFixed(2)}`,
    );

    expect(upstream429).toBeLessThanOrEqual(Math.floor(results.length * 0.001));
    for (const n of perWindow.values()) expect(n).toBeLessThanOrEqual(BUDGET + OVER_ADMISSION);
    // People are never refused (their 4 a second fit the window); agents are refused before them, background work first.
    expect(of('interactive', 'refused')).toBe(0);
    expect(of('agent', 'refused')).toBeGreaterThan(0);
    expect(share('background')).toBeGreaterThanOrEqual(share('agent'));

    // What the instances counted is what the upstream saw: /metrics (each instance's) and the tenant (all of them, per window).
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
    const usage = tenant.body.quotaUsage.read;
    expect(usage.budget).toBe('400/60s');
    for (const w of [usage.window, usage.previousWindow] as Array<{ start: string; spent: number }>)
      expect([w.start, w.spent]).toEqual([w.start, perWindow.get(Date.parse(w.start) / WINDOW_MS) ?? 0]);
  }, 150_000);
});
