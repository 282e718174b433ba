import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ShiftedClock } from './support/agents.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

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

/** sync.failing (API.md 12): once a user's listing has failed for an hour, announced once, with the reason and no token. */
describe('synced records: a listing failing for an hour', () => {
  let t: TestApp;
  const clock = new ShiftedClock();
  const workflows: string[] = [];

  async function state(): Promise<SyncItem> {
    return (await t.request<{ items: SyncItem[] }>('GET', '/v1/tenants/acme/sync?userId=alice')).body.items[0];
  }

  /** Lists now and waits until the attempt is stored (its error set, or listed). */
  async function attempt(): Promise<SyncItem> {
    const before = await state();
    expect((await t.request('POST', '/v1/tenants/acme/sync', { body: { userId: 'alice' } })).status).toBe(202);
    return waitUntil('a listing attempt', async () => {
      const s = await state();
      return s.nextListAt !== before.nextListAt && Date.parse(s.nextListAt) > Date.now() ? s : null;
    });
  }

  async function failing(): Promise<EventItem[]> {
    const res = await t.request<{ events: EventItem[] }>('GET', '/v1/tenants/acme/events?limit=500');
    return res.body.events.filter((e) => e.type === 'sync.failing');
  }

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { SYNC_WORKFLOWS: 'on', SYNC_POLL_INTERVAL: '1h' } });
    await newTenant(t, 'acme');
    expect((await connectViaHttp(t, 'acme', { userId: 'alice', as: 'alice' })).status).toBe('connected');
    for (const name of ['Kept', 'Gone']) {
      const res = await t.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', {
        headers: { 'x-user-id': 'alice' },
        body: { name },
      });
      expect(res.status).toBe(201);
      workflows.push(res.body.id);
    }
    await waitUntil('the first listing', async () => (await state())?.state === 'ready');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('keeps its state for the first hour of failures, then turns failing and says so once', async () => {
    t.sandbox!.setFault({ mode: 'status', status: 503, paths: ['/workflows'] });
    const first = await attempt();
    expect(first.state).toBe('ready');
    expect(first.lastError).toContain('503');
    expect(await failing()).toEqual([]);

    clock.offsetMs = 61 * 60_000;
    const later = await attempt();
    expect(later.state).toBe('failing');
    await attempt();
    const events = await failing();
    expect(events).toHaveLength(1);
    expect(events[0].payload.userId).toBe('alice');
    expect(String(events[0].payload.reason)).toContain('503');
    expect(JSON.stringify(events[0].payload)).not.toMatch(/Bearer|access_token|eyJ/);
    expect(later.records).toBeGreaterThanOrEqual(0);

    t.sandbox!.setFault(null);
    const back = await attempt();
    expect(back.state).toBe('ready');
    expect(back.lastError).toBeUndefined();
  });

  it('an unchanged listing of 1,000 workflows costs 1 upstream call and writes no record and no feed row', async () => {
    t.sandbox!.bulkCreateWorkflows('alice', 1000);
    await attempt();
    expect((await state()).records).toBe(1002);
    const rows = async () =>
      (await t.db.query<{ x: string }>(`SELECT string_agg(xmin::text, ',' ORDER BY workflow_id) AS x FROM records`)).rows[0].x;
    const feedRows = async () => Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM record_changes`)).rows[0].n);
    const [xmins, feed] = [await rows(), await feedRows()];
    t.sandbox!.clearRecords();
    await attempt();
    expect(t.sandbox!.records().filter((r) => r.path === '/workflows')).toHaveLength(1);
    expect(await rows()).toBe(xmins);
    expect(await feedRows()).toBe(feed);
  });

  it('prunes tombstones and feed rows past SYNC_TOMBSTONE_DAYS; a cursor that old is 410 cursor_expired', async () => {
    const old = await t.request<{ next: string }>('GET', '/v1/tenants/acme/records/workflows/changes');
    t.sandbox!.setWorkflowVisibility(workflows[1], 'alice', false);
    await attempt();
    const tombstones = await t.db.query(`SELECT 1 FROM records WHERE deleted_at IS NOT NULL`);
    expect(tombstones.rowCount).toBe(1);
    expect((await t.db.query(`SELECT 1 FROM record_changes`)).rowCount).toBeGreaterThan(0);

    clock.offsetMs = 32 * 86_400_000;
    await waitUntil(
      'the prune',
      async () =>
        (await t.db.query(`SELECT 1 FROM record_changes`)).rowCount === 0 &&
        (await t.db.query(`SELECT 1 FROM records WHERE deleted_at IS NOT NULL`)).rowCount === 0,
      30_000,
      250,
    );
    // The live record stays.
    expect((await t.db.query(`SELECT 1 FROM records WHERE workflow_id = $1 AND deleted_at IS NULL`, [workflows[0]])).rowCount).toBe(1);
    const expired = await t.request<{ error: { code: string } }>(
      'GET',
      `/v1/tenants/acme/records/workflows/changes?cursor=${old.body.next}`,
    );
    expect(expired.status).toBe(410);
    expect(expired.body.error.code).toBe('cursor_expired');
  });
});
