import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CwsApiError, CwsConnectClient, type RecordFeedItem } from '@cws-connect/node-client';
import { encodeChangeCursor } from '../src/records/change-cursor.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

const DAY_MS = 86_400_000;

describe('node client: synced records and the change iterator (API.md 12)', () => {
  let t: TestApp;
  let client: CwsConnectClient;
  let apiKey = '';
  const wf: Record<string, string> = {};

  async function launch(userId: string, name: string): Promise<string> {
    const res = await t.request<{ id: string }>('POST', '/v1/tenants/rec-co/workflows', {
      headers: { 'x-user-id': userId },
      body: { name },
    });
    expect(res.status).toBe(201);
    return res.body.id;
  }

  /** Asks for a listing now (through the client) and waits until one completed after the ask. */
  async function listNow(userId: string): Promise<void> {
    const before = (await client.syncState({ userId })).items[0]?.lastListedAt ?? null;
    await client.syncNow(userId);
    await waitUntil(`a listing of ${userId}`, async () => {
      const state = (await client.syncState({ userId })).items[0];
      return state !== undefined && state.lastListedAt !== null && state.lastListedAt !== before;
    });
  }

  /**
   * Items of the iterator until `enough` says so (or 20 s pass: the iteration ends and the caller's assertions fail).
   * `onItem` runs while the iterator waits for the next item; `whenReading` once it has asked the feed a first time.
   */
  async function collect(
    options: Parameters<CwsConnectClient['changes']>[0],
    enough: (items: RecordFeedItem[]) => boolean,
    hooks: { whenReading?: () => Promise<void>; onItem?: (item: RecordFeedItem) => Promise<void> } = {},
  ): Promise<RecordFeedItem[]> {
    const items: RecordFeedItem[] = [];
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), 20_000);
    let reading: () => void = () => undefined;
    const firstRead = new Promise<void>((resolve) => (reading = resolve));
    const watched = new CwsConnectClient({
      baseUrl: t.url,
      apiKey,
      tenantId: 'rec-co',
      fetch: (input, init) => {
        const url = input instanceof Request ? input.url : String(input);
        if (url.includes('/records/workflows/changes')) reading();
        return fetch(input, init);
      },
    });
    const side = hooks.whenReading ? firstRead.then(hooks.whenReading) : undefined;
    try {
      for await (const item of watched.changes({ pollIntervalMs: 100, ...options, signal: options?.signal ?? stop.signal })) {
        items.push(item);
        if (enough(items)) break;
        await hooks.onItem?.(item);
      }
    } finally {
      clearTimeout(timer);
      reading();
      await side;
    }
    return items;
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { SYNC_POLL_INTERVAL: '1h' } });
    await newTenant(t, 'rec-co');
    expect((await t.request('PATCH', '/v1/tenants/rec-co', { body: { sync: { workflows: true } } })).status).toBe(200);
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/rec-co/api-keys', { body: { name: 'client' } });
    apiKey = key.body.key;
    client = new CwsConnectClient({ baseUrl: t.url, apiKey, tenantId: 'rec-co' });
    for (const user of ['alice', 'bob']) expect((await connectViaHttp(t, 'rec-co', { userId: user, as: user })).status).toBe('connected');
    wf.a1 = await launch('alice', 'NDA One');
    wf.a2 = await launch('alice', 'Lease Two');
    wf.b1 = await launch('bob', 'MSA Three');
    await listNow('alice');
    await listNow('bob');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('lists and reads the copy, and the sync state; errors are CwsApiError', async () => {
    const page = await client.listRecords('alice', { limit: 1 });
    expect(page.items).toHaveLength(1);
    expect(page.next).not.toBeNull();
    const rest = await client.listRecords('alice', { after: page.next! });
    expect(new Set([...page.items, ...rest.items].map((r) => r.id))).toEqual(new Set([wf.a1, wf.a2]));
    expect(rest.next).toBeNull();
    const one = await client.getRecord('alice', wf.a1);
    expect(one).toMatchObject({ id: wf.a1, userId: 'alice' });
    expect(one.data.name).toBe('NDA One');
    const state = await client.syncState({ userId: 'alice' });
    expect(state.items[0]).toMatchObject({ userId: 'alice', state: 'ready', records: 2 });
    const missing = await client.getRecord('alice', wf.b1).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(CwsApiError);
    expect(missing).toMatchObject({ status: 404, code: 'record_not_found' });
    const stranger = await client.syncNow('nobody').catch((e: unknown) => e);
    expect(stranger).toMatchObject({ status: 409, code: 'user_not_connected' });
  });

  let stored = '';

  it('a change made in the sandbox arrives through the iterator (from a fresh read of the cursor), once', async () => {
    const items = await collect({ userId: 'alice' }, (got) => got.length >= 1, {
      // The iterator has read its starting cursor (then asked the feed): the change is made after it.
      whenReading: async () => {
        t.sandbox!.setWorkflowStep(wf.a1, 'Review');
        await listNow('alice');
      },
    });
    expect(items).toHaveLength(1);
    const [change] = items;
    expect(change).toMatchObject({ kind: 'change', id: wf.a1, userId: 'alice', action: 'updated' });
    expect(change.kind === 'change' && change.data?.step).toBe('Review');
    stored = change.cursor;
  });

  it('a stored cursor resumes after its change: the next change only, no repeat', async () => {
    t.sandbox!.setWorkflowAttribute(wf.a2, 'value', 7);
    await listNow('alice');
    const items = await collect({ userId: 'alice', cursor: stored }, (got) => got.length >= 1);
    expect(items.map((i) => (i.kind === 'change' ? `${i.id}/${i.action}` : i.kind))).toEqual([`${wf.a2}/updated`]);
    // Caught up: a poll more brings nothing, and the iteration ends when the signal aborts.
    const resumed = items[0].cursor;
    const none = await collect({ userId: 'alice', cursor: resumed, signal: AbortSignal.timeout(800) }, () => false);
    expect(none).toEqual([]);
  });

  it('410 cursor_expired: yields a reset with the current copy, then goes on from its cursor', async () => {
    const old = encodeChangeCursor({ writerXid: '1', seq: 1, at: Date.now() - 31 * DAY_MS });
    const direct = await client.recordChangesPage({ cursor: old, userId: 'alice' }).catch((e: unknown) => e);
    expect(direct).toMatchObject({ status: 410, code: 'cursor_expired' });
    const before = await client.listRecords('alice');
    const items = await collect({ userId: 'alice', cursor: old }, (got) => got.length >= 2, {
      // Once the reset is in hand, a change: it must come next, from the reset's cursor.
      onItem: async (item) => {
        if (item.kind !== 'reset') return;
        t.sandbox!.setWorkflowStep(wf.a2, 'Sign');
        await listNow('alice');
      },
    });
    expect(items[0].kind).toBe('reset');
    const reset = items[0] as Extract<RecordFeedItem, { kind: 'reset' }>;
    expect(reset.records.map((r) => r.id).sort()).toEqual([wf.a1, wf.a2].sort());
    expect(reset.records.every((r) => r.userId === 'alice')).toBe(true);
    // The copy as it stood (the attribute set in the previous test included), read whole.
    expect(reset.records.sort((a, b) => a.id.localeCompare(b.id))).toEqual(before.items.sort((a, b) => a.id.localeCompare(b.id)));
    expect(reset.cursor).toEqual(expect.any(String));
    expect(items[1]).toMatchObject({ kind: 'change', id: wf.a2, action: 'updated' });
    expect(items[1].kind === 'change' && items[1].data?.step).toBe('Sign');
    expect(items).toHaveLength(2);
  });

  it('without userId follows the whole tenant; other errors are thrown as CwsApiError', async () => {
    t.sandbox!.setWorkflowStep(wf.b1, 'Review');
    const bad = client.changes({ cursor: 'nope' });
    await expect(bad.next()).rejects.toMatchObject({ name: 'CwsApiError', status: 400, code: 'validation_failed' });
    const items = await collect({}, (got) => got.some((i) => i.kind === 'change' && i.id === wf.b1), { whenReading: () => listNow('bob') });
    expect(items.filter((i) => i.kind === 'change').map((i) => (i.kind === 'change' ? `${i.userId}/${i.id}` : ''))).toEqual([
      `bob/${wf.b1}`,
    ]);
  });
});
