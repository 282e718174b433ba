import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ChangeFeed } from '../src/changes/change-feed.service.js';
import { parseBudget, type Budget } from '../src/config/quota-budgets.js';
import { leaseRuleOf, logOf } from '../src/quota/lane-policy.js';
import { QuotaWindowsRepository } from '../src/quota/quota-windows.repository.js';
import { RouteCache } from '../src/routing/route-cache.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}
interface Usage {
  budget: string | null;
  source: string | null;
  pausedUntil: string | null;
  window: { start: string; end: string; spent: number; waited: number; refused: number; upstream429: number } | null;
}
interface Tenant {
  quotas: Record<string, string> | null;
  quotaUsage: { read: Usage; write: Usage };
}

async function waitLive(t: TestApp): Promise<void> {
  const feed = t.app.get(ChangeFeed);
  for (let i = 0; i < 100 && !feed.live; i++) await new Promise((r) => setTimeout(r, 50));
  expect(feed.live).toBe(true);
}

/**
 * Until the instance's route cache holds no stale view of the tenant's read budget: the change feed carries a
 * PATCH to every instance's cache, the one that made it included, a few milliseconds later (longer on a loaded
 * machine). Absent from the cache, the next call reads the row.
 */
async function budgetKnown(t: TestApp, tenantId: string, read: boolean): Promise<void> {
  const cache = t.app.get(RouteCache);
  const seen = await eventually(
    async () => cache.tenant(tenantId),
    (v) => v === undefined || (v.quotas.read !== undefined) === read,
  );
  expect(seen === undefined || (seen.quotas.read !== undefined) === read).toBe(true);
}

async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 3000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('upstream budgets (docs/quotas.md)', () => {
  let a: TestApp;
  let b: TestApp;
  const user = { 'x-user-id': 'u-alice' };
  const sentUpstream = () => a.sandbox!.records().filter((r) => r.path.startsWith('/workflows')).length;

  beforeAll(async () => {
    a = await startTestApp();
    b = await startSecondInstance(a);
    for (const id of ['acme', 'globex']) {
      await newTenant(a, id);
      expect((await connectViaHttp(a, id, { userId: 'u-alice', as: 'alice' })).status).toBe('connected');
    }
    await Promise.all([waitLive(a), waitLive(b)]);
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it("PATCH sets a tenant's own budgets, checked; the tenant shows them, whose they are, and each class's window", async () => {
    const set = (quotas: unknown) => a.request<Tenant & ErrorBody>('PATCH', '/v1/tenants/acme', { body: { quotas } });
    const ok = await set({ read: '3/1h', write: null });
    expect(ok.status).toBe(200);
    expect(ok.body.quotas).toEqual({ read: '3/1h' });
    expect(ok.body.quotaUsage.read).toMatchObject({
      budget: '3/1h',
      source: 'tenant',
      pausedUntil: null,
      window: { spent: 0, refused: 0 },
    });
    expect(ok.body.quotaUsage.write).toEqual({ budget: null, source: null, pausedUntil: null, window: null, previousWindow: null });
    for (const [bad, problem] of [
      [{ read: '3 per hour' }, /quotas\.read: a budget is <calls>\/<window>/],
      [{ read: '0/60s' }, /quotas\.read: the calls of a budget are 1 to/],
      [{ write: '5/2d' }, /quotas\.write/],
      [{ delete: '5/60s' }, /property delete should not exist/],
      ['400/60s', /quotas must be an object/],
    ] as const) {
      const refused = await set(bad);
      expect([refused.status, refused.body.error.code]).toEqual([400, 'validation_failed']);
      expect(refused.text).toMatch(problem);
    }
    expect((await a.request<Tenant>('GET', '/v1/tenants/acme')).body.quotas).toEqual({ read: '3/1h' });
    expect((await a.request<Tenant>('PATCH', '/v1/tenants/globex', { body: { quotas: { read: '1000/1h' } } })).status).toBe(200);
  });

  it('a spent budget is 429 quota_exhausted with Retry-After on every instance, sending nothing upstream; writes have none', async () => {
    const before = sentUpstream();
    const list = (t: TestApp) => t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: user });
    // The budget change reaches each instance's cache through the change feed.
    for (const t of [a, b]) await budgetKnown(t, 'acme', true);
    const statuses = [(await list(a)).status, (await list(b)).status, (await list(a)).status];
    expect(statuses).toEqual([200, 200, 200]);
    const refused = await list(b);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'quota_exhausted', requestId: expect.any(String) });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    // No later than when the first call leaves the log's span (a window, a unit's life, the jitter; one bucket).
    const log = logOf(parseBudget('3/1h') as Budget);
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil((log.spanMs + log.bucketMs) / 1000));
    expect(refused.body.error.details).toMatchObject({ class: 'read', lane: 'interactive', retryAfterSeconds: retryAfter });
    expect(sentUpstream() - before).toBe(3);
    const write = await a.request('POST', '/v1/tenants/acme/workflows', { headers: user, body: { name: 'Not counted as a read' } });
    expect(write.status).toBe(201);
    // Another tenant of the same environment has its own.
    expect((await a.request('GET', '/v1/tenants/globex/workflows', { headers: user })).status).toBe(200);
    const usage = await eventually(
      async () => (await b.request<Tenant>('GET', '/v1/tenants/acme')).body.quotaUsage.read.window,
      (w) => w !== null && w.spent === 3 && w.refused === 1,
    );
    // A call now and then waits for its own lease: no unit is leased ahead of fewer than one call per unit life.
    expect(usage).toMatchObject({ spent: 3, refused: 1, waited: 3, upstream429: 0 });
    const metrics = (await b.request('GET', '/metrics', { key: null })).text;
    expect(metrics).toMatch(/^cws_quota_calls_total\{class="read",lane="interactive",outcome="refused"\} 1$/m);
    expect((await a.request<Tenant>('PATCH', '/v1/tenants/acme', { body: { quotas: null } })).body.quotas).toBeNull();
  });

  it("the upstream's 429 is answered as it came, never retried, and pauses the class on every instance until its Retry-After", async () => {
    const sandbox = a.sandbox!;
    const before = sentUpstream();
    sandbox.setFault({ mode: 'status', status: 429, retryAfterSeconds: 3, count: 1, paths: ['/workflows'] });
    const first = await a.request('GET', '/v1/tenants/globex/workflows', { headers: user });
    expect([first.status, first.headers.get('x-upstream-status'), first.headers.get('retry-after')]).toEqual([429, '429', '3']);
    const paused = await eventually(
      () => b.request<ErrorBody>('GET', '/v1/tenants/globex/workflows', { headers: user }),
      (r) => r.status === 429,
    );
    expect(paused.body.error.code).toBe('quota_exhausted');
    expect(Number(paused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(paused.headers.get('retry-after'))).toBeLessThanOrEqual(3);
    expect(sentUpstream() - before).toBe(1);
    const tenant = await eventually(
      async () => (await a.request<Tenant>('GET', '/v1/tenants/globex')).body.quotaUsage.read,
      (u) => u.window?.upstream429 === 1,
    );
    expect(tenant.pausedUntil).not.toBeNull();
    expect(tenant.window?.upstream429).toBe(1);
    await new Promise((r) => setTimeout(r, 3100));
    expect((await b.request('GET', '/v1/tenants/globex/workflows', { headers: user })).status).toBe(200);
  });

  it('a 429 without Retry-After on a write: not retried, then a backoff (no budget configured)', async () => {
    const sandbox = a.sandbox!;
    sandbox.clearRecords();
    sandbox.setFault({ mode: 'status', status: 429, count: 1, paths: ['/workflows'] });
    const create = (t: TestApp) => t.request<ErrorBody>('POST', '/v1/tenants/acme/workflows', { headers: user, body: { name: 'Once' } });
    const first = await create(b);
    expect([first.status, first.headers.get('x-upstream-status'), first.headers.get('retry-after')]).toEqual([429, '429', null]);
    expect(sandbox.records().filter((r) => r.method === 'POST' && r.path === '/workflows')).toHaveLength(1);
    const backoff = await create(b);
    expect([backoff.status, backoff.body.error.code, backoff.headers.get('retry-after')]).toEqual([429, 'quota_exhausted', '1']);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await create(a)).status).toBe(201);
  });

  it('instances leasing one log at once are never granted more than its budget (the bound of docs/quotas.md)', async () => {
    const repos = [a, b].map((t) => t.app.get(QuotaWindowsRepository, { strict: false }));
    const budget = parseBudget('500/60s') as Budget;
    const got = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        let units = 0;
        for (;;) {
          const lease = await repos[i % 2].lease('globex', 'write', logOf(budget), 'interactive', 7, leaseRuleOf(budget.calls));
          if (lease.units === 0) return units;
          units += lease.units;
        }
      }),
    );
    expect(got.reduce((x, y) => x + y, 0)).toBe(500);
  });
});
