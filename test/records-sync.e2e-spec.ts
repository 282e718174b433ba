import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

interface RecordItem {
  id: string;
  userId: string;
  data: Record<string, unknown>;
  version: number | null;
}
interface ChangeItem {
  id: string;
  userId: string;
  action: 'added' | 'updated' | 'deleted';
  version: number | null;
  cursor: string;
}
interface SyncItem {
  userId: string;
  state: string;
  records: number;
  lastListedAt: string | null;
  nextListAt: string;
  lastError?: string;
}
interface EventItem {
  type: string;
  payload: Record<string, unknown>;
}

const USERS = ['alice', 'bob', 'carol'];

/** JSON with sorted keys: the copy keeps the object canonical, the upstream writes its own order. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const o = value as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

/**
 * The sync engine against the sandbox's controls: a paged listing, a page failing part way, users losing sight of a
 * workflow, webhooks dropped (10 % and all of them), and the copy after one interval.
 */
describe('synced records: listings, paging, lost visibility, dropped webhooks (API.md 12)', () => {
  let t: TestApp;
  const ids: string[] = [];

  async function syncState(userId: string): Promise<SyncItem> {
    const res = await t.request<{ items: SyncItem[] }>('GET', `/v1/tenants/acme/sync?userId=${userId}`);
    return res.body.items[0];
  }

  async function syncNow(userId: string): Promise<SyncItem> {
    const before = (await syncState(userId))?.lastListedAt ?? null;
    expect((await t.request('POST', '/v1/tenants/acme/sync', { body: { userId } })).status).toBe(202);
    return waitUntil(`a listing of ${userId}`, async () => {
      const s = await syncState(userId);
      return s && s.lastListedAt !== null && s.lastListedAt !== before ? s : null;
    });
  }

  async function records(userId: string): Promise<RecordItem[]> {
    const res = await t.request<{ items: RecordItem[] }>('GET', `/v1/tenants/acme/records/workflows?userId=${userId}&limit=1000`);
    expect(res.status).toBe(200);
    return res.body.items;
  }

  async function feedAfter(cursor: string | null): Promise<{ items: ChangeItem[]; next: string }> {
    const items: ChangeItem[] = [];
    let next = cursor;
    for (;;) {
      const q = next === null ? 'limit=500' : `limit=500&cursor=${next}`;
      const res = await t.request<{ items: ChangeItem[]; next: string }>('GET', `/v1/tenants/acme/records/workflows/changes?${q}`);
      expect(res.status).toBe(200);
      items.push(...res.body.items);
      next = res.body.next;
      if (res.body.items.length < 500) return { items, next };
    }
  }

  /** What the user's own token lists upstream (every page), id → object. */
  async function upstream(userId: string): Promise<Map<string, Record<string, unknown>>> {
    const all = new Map<string, Record<string, unknown>>();
    let url: string | null = `${t.sandbox!.url}/workflows`;
    const token = t.sandbox!.issueTokens(userId).access_token;
    while (url) {
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Array<Record<string, unknown>> | { workflows: Array<Record<string, unknown>> };
      for (const w of Array.isArray(body) ? body : body.workflows) all.set(w.id as string, w);
      const link = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '');
      url = link ? new URL(link[1], url).toString() : null;
    }
    return all;
  }

  async function expectCopyEqualsUpstream(): Promise<void> {
    for (const user of USERS) {
      const copy = await records(user);
      const listed = await upstream(user);
      expect(copy.map((r) => r.id).sort()).toEqual([...listed.keys()].sort());
      for (const r of copy) expect(r.data).toEqual(listed.get(r.id));
    }
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { SYNC_WORKFLOWS: 'on', SYNC_POLL_INTERVAL: '2s' } });
    await newTenant(t, 'acme');
    for (const user of USERS) expect((await connectViaHttp(t, 'acme', { userId: user, as: user })).status).toBe('connected');
    expect((await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' })).status).toBe('connected');
    expect(
      (await t.request('POST', '/v1/tenants/acme/webhooks', { body: { events: ['workflow_step_updated', 'workflow_attribute_updated'] } }))
        .status,
    ).toBe(201);
    for (let i = 0; i < 7; i++) {
      const res = await t.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', {
        headers: { 'x-user-id': USERS[i % 3] },
        body: { name: `Contract ${i}`, approvers: [USERS[(i + 1) % 3]] },
      });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    t.sandbox!.setListing({ pageSize: 2 });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('follows every page (Link rel="next") and copies what each token lists', async () => {
    for (const user of USERS) expect((await syncNow(user)).state).toBe('ready');
    await expectCopyEqualsUpstream();
    const listCalls = t.sandbox!.records().filter((r) => r.path.startsWith('/workflows') && r.method === 'GET');
    expect(listCalls.length).toBeGreaterThan(USERS.length);
  });

  it('a listing failing on its second page removes nothing; the next complete one removes what the user lost sight of', async () => {
    const { next: start } = await feedAfter(null);
    const lost = (await records('alice'))[0].id;
    t.sandbox!.setWorkflowVisibility(lost, 'alice', false);
    t.sandbox!.setListing({ pageSize: 2, fail: { page: 2, status: 500, times: 1 } });
    expect((await t.request('POST', '/v1/tenants/acme/sync', { body: { userId: 'alice' } })).status).toBe(202);
    await waitUntil('the failed listing', async () => ((await syncState('alice')).lastError ?? '').includes('500'));
    expect((await records('alice')).map((r) => r.id)).toContain(lost);
    expect((await feedAfter(start)).items.filter((c) => c.action === 'deleted')).toEqual([]);

    await waitUntil(
      'a complete listing',
      async () => (await syncState('alice')).lastError === undefined && !(await records('alice')).some((r) => r.id === lost),
    );
    const deleted = (await feedAfter(start)).items.filter((c) => c.action === 'deleted');
    expect(deleted.map((c) => `${c.userId}/${c.id}`)).toEqual([`alice/${lost}`]);
    const notFound = await t.request('GET', `/v1/tenants/acme/records/workflows/${lost}?userId=alice`);
    expect(notFound.status).toBe(404);
    // Seen again: added back.
    t.sandbox!.setWorkflowVisibility(lost, 'alice', true);
    await syncNow('alice');
    expect((await feedAfter(start)).items.filter((c) => c.id === lost && c.userId === 'alice').map((c) => c.action)).toEqual([
      'deleted',
      'added',
    ]);
  });

  it('with webhooks dropped (10 %, then all), every change is in the copy after one interval, each once in the feed', async () => {
    for (const rate of [0.1, 1]) {
      t.sandbox!.setWebhookDropRate(rate);
      const { next: start } = await feedAfter(null);
      const changed = ids.slice(0, 4);
      for (const id of changed) t.sandbox!.setWorkflowAttribute(id, 'round', rate);
      await waitUntil(
        'the copy to catch up',
        async () => {
          for (const user of USERS) {
            const copy = new Map((await records(user)).map((r) => [r.id, r]));
            for (const [id, w] of await upstream(user)) if (canonical(copy.get(id)?.data) !== canonical(w)) return false;
          }
          return true;
        },
        20_000,
        200,
      );
      await expectCopyEqualsUpstream();
      const items = (await feedAfter(start)).items;
      // Each (user, workflow) that changed appears exactly once; nothing else changed.
      const keys = items.map((c) => `${c.userId}/${c.id}`);
      expect(new Set(keys).size).toBe(keys.length);
      expect(items.every((c) => c.action === 'updated' && changed.includes(c.id))).toBe(true);
      const holders = USERS.flatMap((u) => changed.map((id) => ({ u, id })));
      let expected = 0;
      for (const { u, id } of holders) if ((await upstream(u)).has(id)) expected++;
      expect(items.length).toBe(expected);
    }
    t.sandbox!.setWebhookDropRate(0);
  });

  it('an unchanged listing writes nothing and announces nothing', async () => {
    const events = async () =>
      (await t.request<{ events: EventItem[] }>('GET', '/v1/tenants/acme/events?limit=500')).body.events.filter(
        (e) => e.type === 'record.changed',
      ).length;
    const { next: start } = await feedAfter(null);
    const before = await events();
    for (const user of USERS) await syncNow(user);
    for (const user of USERS) await syncNow(user);
    expect((await feedAfter(start)).items).toEqual([]);
    expect(await events()).toBe(before);
  });

  it('announces a first listing once (sync.ready per user), not per record', async () => {
    const all = (await t.request<{ events: EventItem[] }>('GET', '/v1/tenants/acme/events?limit=500')).body.events;
    const ready = all.filter((e) => e.type === 'sync.ready');
    expect(ready.map((e) => e.payload.userId).sort()).toEqual([...USERS].sort());
  });

  it('a token expiring between the pages of a listing is renewed once (renew-on-401); the listing completes, nothing removed', async () => {
    const { next: start } = await feedAfter(null);
    const before = (await records('alice')).map((r) => r.id).sort();
    t.sandbox!.setFault({ mode: 'slow', delayMs: 300, paths: ['/workflows'] });
    try {
      t.sandbox!.clearRecords();
      const listedBefore = (await syncState('alice')).lastListedAt;
      expect((await t.request('POST', '/v1/tenants/acme/sync', { body: { userId: 'alice' } })).status).toBe(202);
      // The first page of alice's listing has been answered: her token expires before the next one.
      await waitUntil(
        'the first page',
        () => t.sandbox!.records().some((r) => r.path === '/workflows' && r.tokenUserId === 'alice' && r.status === 200),
        15_000,
        5,
      );
      t.sandbox!.expireAccessTokens({ userId: 'alice' });
      await waitUntil('the listing', async () => (await syncState('alice')).lastListedAt !== listedBefore);
    } finally {
      t.sandbox!.setFault(null);
    }
    // Page 1 answered, page 2 refused (401: the token is no longer alice's), one renewal, page 2 again, and on.
    const calls = t.sandbox!.records().filter((r) => r.path === '/workflows' || r.path === '/oauth/token');
    const refused = calls.findIndex((r) => r.status === 401);
    expect(refused).toBeGreaterThan(0);
    expect(calls[refused - 1]).toMatchObject({ tokenUserId: 'alice', status: 200 });
    expect(calls[refused + 1]).toMatchObject({ path: '/oauth/token', status: 200 });
    expect(calls[refused + 2]).toMatchObject({ path: '/workflows', query: calls[refused].query, tokenUserId: 'alice', status: 200 });
    expect(calls.filter((r) => r.status === 401)).toHaveLength(1);
    expect((await syncState('alice')).lastError).toBeUndefined();
    expect((await records('alice')).map((r) => r.id).sort()).toEqual(before);
    expect((await feedAfter(start)).items.filter((c) => c.userId === 'alice')).toEqual([]);
  });

  it("never spends more than SYNC_BUDGET_SHARE of the company's read budget; people are not held, nothing removed", async () => {
    expect((await t.request('PATCH', '/v1/tenants/acme', { body: { sync: { workflows: false } } })).status).toBe(200);
    const paused = (await t.request<{ items: SyncItem[] }>('GET', '/v1/tenants/acme/sync')).body.items;
    expect(paused.map((u) => u.state)).toEqual(['paused', 'paused', 'paused']);
    await newTenant(t, 'thrifty');
    expect((await t.request('PATCH', '/v1/tenants/thrifty', { body: { quotas: { read: '20/24h' } } })).status).toBe(200);
    for (const user of USERS) expect((await connectViaHttp(t, 'thrifty', { userId: user, as: user })).status).toBe('connected');
    await new Promise((r) => setTimeout(r, 1500)); // acme's listings in flight end
    t.sandbox!.clearRecords();
    expect((await t.request('POST', '/v1/tenants/thrifty/sync', { body: {} })).status).toBe(202);
    const states = async () => (await t.request<{ items: SyncItem[] }>('GET', '/v1/tenants/thrifty/sync')).body.items;
    await waitUntil('every user tried', async () => {
      const s = await states();
      return s.length === USERS.length && s.every((u) => u.lastListedAt !== null || u.lastError !== undefined);
    });
    // The share is 25 % of 20 reads a day: 5 calls, whatever the users need (3 pages each at 2 a page).
    const listCalls = () => t.sandbox!.records().filter((r) => r.method === 'GET' && r.path.startsWith('/workflows')).length;
    expect(listCalls()).toBeLessThanOrEqual(5);
    expect((await states()).filter((u) => (u.lastError ?? '').includes('share')).length).toBeGreaterThan(0);
    // The refused are deferred, not retried hot: they wait for the share (its burst rule's next part, or a call
    // leaving the budgets' sliding log, a day's span here), and meanwhile no listing call goes out.
    await new Promise((r) => setTimeout(r, 2000));
    expect(listCalls()).toBeLessThanOrEqual(5);
    // People are served from the rest of the budget.
    const person = await t.request('GET', '/v1/tenants/thrifty/workflows', { headers: { 'x-user-id': 'alice' } });
    expect(person.status).toBe(200);
    expect(listCalls()).toBeLessThanOrEqual(6);
  });
});
