import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { encodeChangeCursor } from '../src/records/change-cursor.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface RecordItem {
  id: string;
  userId: string;
  data: Record<string, unknown>;
  version: number | null;
  lastModified: string | null;
  syncedAt: string;
}
interface RecordPage {
  items: RecordItem[];
  next: string | null;
  cursor: string;
}
interface ChangeItem {
  id: string;
  userId: string;
  action: 'added' | 'updated' | 'deleted';
  version: number | null;
  data?: Record<string, unknown>;
  cursor: string;
}
interface ChangePage {
  items: ChangeItem[];
  next: string;
}
interface SyncItem {
  userId: string;
  connectionId: string;
  state: string;
  records: number;
  lastListedAt: string | null;
  lastChangeAt: string | null;
  nextListAt: string;
  lagSeconds: number;
  lastError?: string;
  failingSince: string | null;
}
interface EventItem {
  id: string;
  type: string;
  payload: Record<string, unknown>;
}

describe('synced records (API.md 12): the copy, the change feed, sync state', () => {
  let t: TestApp;
  const workflows: Record<string, string> = {};

  async function launch(userId: string, name: string, approvers: string[] = []): Promise<string> {
    const res = await t.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', {
      headers: { 'x-user-id': userId },
      body: { name, approvers },
    });
    expect(res.status).toBe(201);
    return res.body.id;
  }

  async function syncState(userId: string): Promise<SyncItem> {
    const res = await t.request<{ items: SyncItem[] }>('GET', `/v1/tenants/acme/sync?userId=${userId}`);
    expect(res.status).toBe(200);
    return res.body.items[0];
  }

  /** Asks for a listing of the user now and waits until one completed after the ask. */
  async function syncNow(userId: string): Promise<SyncItem> {
    const before = (await syncState(userId).catch(() => undefined))?.lastListedAt ?? null;
    const res = await t.request('POST', '/v1/tenants/acme/sync', { body: { userId } });
    expect(res.status).toBe(202);
    let state: SyncItem | undefined;
    await waitUntil(`a listing of ${userId}`, async () => {
      state = await syncState(userId);
      return state !== undefined && state.lastListedAt !== null && state.lastListedAt !== before;
    });
    return state as SyncItem;
  }

  /** Asks for a listing and waits until it was attempted (its error stored), whatever its outcome. */
  async function syncAttempt(userId: string): Promise<SyncItem> {
    const res = await t.request('POST', '/v1/tenants/acme/sync', { body: { userId } });
    expect(res.status).toBe(202);
    let state: SyncItem | undefined;
    await waitUntil(`a listing attempt of ${userId}`, async () => {
      state = await syncState(userId);
      return state !== undefined && Date.parse(state.nextListAt) > Date.now() + 5_000;
    });
    return state as SyncItem;
  }

  async function records(userId: string): Promise<RecordItem[]> {
    const res = await t.request<RecordPage>('GET', `/v1/tenants/acme/records/workflows?userId=${userId}&limit=1000`);
    expect(res.status).toBe(200);
    return res.body.items;
  }

  async function changesFrom(cursor: string | null, userId?: string): Promise<{ items: ChangeItem[]; next: string }> {
    const items: ChangeItem[] = [];
    let next = cursor;
    for (;;) {
      const q = new URLSearchParams({ limit: '50' });
      if (next !== null) q.set('cursor', next);
      if (userId) q.set('userId', userId);
      const res = await t.request<ChangePage>('GET', `/v1/tenants/acme/records/workflows/changes?${q.toString()}`);
      expect(res.status).toBe(200);
      items.push(...res.body.items);
      next = res.body.next;
      if (res.body.items.length < 50) return { items, next };
    }
  }

  async function events(type: string): Promise<EventItem[]> {
    const res = await t.request<{ events: EventItem[] }>('GET', '/v1/tenants/acme/events?limit=500');
    return res.body.events.filter((e) => e.type === type);
  }

  /** What the user's own token lists upstream, by id. */
  async function upstreamList(userId: string): Promise<Map<string, Record<string, unknown>>> {
    const res = await t.request<{ workflows: Array<Record<string, unknown>> } | Array<Record<string, unknown>>>(
      'GET',
      '/v1/tenants/acme/workflows',
      { headers: { 'x-user-id': userId } },
    );
    expect(res.status).toBe(200);
    const list = Array.isArray(res.body) ? res.body : res.body.workflows;
    return new Map(list.map((w) => [w.id as string, w]));
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { SYNC_POLL_INTERVAL: '1h' } });
    await newTenant(t, 'acme');
    await newTenant(t, 'other');
    for (const user of ['alice', 'bob']) {
      const c = await connectViaHttp(t, 'acme', { userId: user, as: user });
      expect(c.status).toBe('connected');
    }
    expect((await connectViaHttp(t, 'other', { userId: 'alice', as: 'alice' })).status).toBe('connected');
    workflows.a1 = await launch('alice', 'NDA Alpha');
    workflows.a2 = await launch('alice', 'Lease Beta', ['bob']);
    workflows.b1 = await launch('bob', 'MSA Gamma');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is off unless the tenant (or SYNC_WORKFLOWS) turns it on: PATCH {"sync": {"workflows": true}}', async () => {
    const off = await t.request<ErrorBody>('POST', '/v1/tenants/acme/sync', { body: {} });
    expect(off.status).toBe(409);
    const patched = await t.request<{ sync: { workflows: boolean | null } }>('PATCH', '/v1/tenants/acme', {
      body: { sync: { workflows: true } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.sync).toEqual({ workflows: true });
    const bad = await t.request<ErrorBody>('PATCH', '/v1/tenants/acme', { body: { sync: { workflows: 'yes' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
  });

  it("a first listing copies exactly what each user's own token lists, announced once by sync.ready", async () => {
    for (const user of ['alice', 'bob']) {
      const state = await syncNow(user);
      expect(state.state).toBe('ready');
      const copy = await records(user);
      const upstream = await upstreamList(user);
      expect(new Set(copy.map((r) => r.id))).toEqual(new Set(upstream.keys()));
      for (const r of copy) {
        expect(r.userId).toBe(user);
        expect(r.data).toEqual(upstream.get(r.id));
        expect(r.version).toBe(upstream.get(r.id)?.versionNumber);
      }
      expect(state.records).toBe(copy.length);
    }
    expect(new Set((await records('alice')).map((r) => r.id))).toEqual(new Set([workflows.a1, workflows.a2]));
    expect(new Set((await records('bob')).map((r) => r.id))).toEqual(new Set([workflows.a2, workflows.b1]));
    const ready = await events('sync.ready');
    expect(ready.map((e) => e.payload.userId).sort()).toEqual(['alice', 'bob']);
    expect(ready.find((e) => e.payload.userId === 'alice')?.payload.records).toBe(2);
    expect(await events('record.changed')).toHaveLength(0);
    const feed = await changesFrom(null);
    expect(feed.items.map((c) => `${c.userId}/${c.id}/${c.action}`).sort()).toEqual(
      [`alice/${workflows.a1}/added`, `alice/${workflows.a2}/added`, `bob/${workflows.a2}/added`, `bob/${workflows.b1}/added`].sort(),
    );
  });

  it('seals the copy at rest: no workflow content in the tables', async () => {
    const rows = await t.db.query<{ text: string }>(`SELECT r::text AS text FROM records r UNION ALL SELECT c::text FROM record_changes c`);
    expect(rows.rows.length).toBeGreaterThan(0);
    for (const row of rows.rows) {
      expect(row.text).not.toContain('NDA Alpha');
      expect(row.text).not.toContain('Lease Beta');
      expect(row.text).not.toContain('alice@acme.example');
    }
  });

  it('a step change (a new lastModified at the same version) is one updated change and one record.changed; no change, nothing', async () => {
    const { next: start } = await changesFrom(null);
    t.sandbox!.setWorkflowStep(workflows.a1, 'Review');
    await syncNow('alice');
    const after = await changesFrom(start);
    expect(after.items).toHaveLength(1);
    expect(after.items[0]).toMatchObject({ id: workflows.a1, userId: 'alice', action: 'updated', version: 1 });
    expect(after.items[0].data?.step).toBe('Review');
    const changed = await events('record.changed');
    expect(changed).toHaveLength(1);
    expect(changed[0].payload).toEqual({
      object: 'workflow',
      id: workflows.a1,
      userId: 'alice',
      action: 'updated',
      version: 1,
      cursor: after.items[0].cursor,
    });
    expect((await t.request<RecordItem>('GET', `/v1/tenants/acme/records/workflows/${workflows.a1}?userId=alice`)).body.data.step).toBe(
      'Review',
    );

    // Listed again with nothing changed: no row written, no change, no event.
    const written = await t.db.query<{ synced: string }>(`SELECT max(synced_at)::text AS synced FROM records`);
    await syncNow('alice');
    await syncNow('bob');
    expect((await changesFrom(after.next)).items).toHaveLength(0);
    expect(await events('record.changed')).toHaveLength(1);
    expect((await t.db.query<{ synced: string }>(`SELECT max(synced_at)::text AS synced FROM records`)).rows[0].synced).toBe(
      written.rows[0].synced,
    );
  });

  it('a new workflow is added at the next listing', async () => {
    const { next: start } = await changesFrom(null);
    workflows.a3 = await launch('alice', 'SOW Delta');
    await syncNow('alice');
    const after = await changesFrom(start);
    expect(after.items.map((c) => `${c.id}/${c.action}`)).toEqual([`${workflows.a3}/added`]);
    expect((await records('alice')).map((r) => r.id).sort()).toEqual([workflows.a1, workflows.a2, workflows.a3].sort());
  });

  it('a listing that fails removes nothing and says why; the next complete one clears the error', async () => {
    const before = await records('alice');
    t.sandbox!.setFault({ mode: 'status', status: 500, paths: ['/workflows'] });
    try {
      const state = await syncAttempt('alice');
      expect(state.lastError).toContain('500');
      expect(Date.parse(state.failingSince!)).toBeLessThanOrEqual(Date.now());
      expect(await records('alice')).toEqual(before);
    } finally {
      t.sandbox!.setFault(null);
    }
    const state = await syncNow('alice');
    expect(state.state).toBe('ready');
    expect(state.lastError).toBeUndefined();
    expect(state.failingSince).toBeNull();
    expect(await records('alice')).toEqual(before);
  });

  it("sync state names the user's connection and how late its listing is (a paused tenant's user is not late)", async () => {
    const connection = (
      await t.request<{ connections: Array<{ id: string }> }>('GET', '/v1/tenants/acme/connections?userId=alice&kind=user')
    ).body.connections[0];
    expect((await syncState('alice')).connectionId).toBe(connection.id);
    // An instance holding alice's listing stopped answering: the listing is 10 minutes late until its lease runs out.
    await t.db.query(
      `UPDATE record_sync SET next_list_at = now() - interval '10 minutes', lease_owner = 'stuck', lease_until = now() + interval '1 minute'
        WHERE connection_id = $1`,
      [connection.id],
    );
    try {
      const late = await syncState('alice');
      expect(late.lagSeconds).toBeGreaterThanOrEqual(600);
      expect((await t.request('PATCH', '/v1/tenants/acme', { body: { sync: { workflows: false } } })).status).toBe(200);
      const paused = await syncState('alice');
      expect(paused.state).toBe('paused');
      expect(paused.lagSeconds).toBe(0);
    } finally {
      expect((await t.request('PATCH', '/v1/tenants/acme', { body: { sync: { workflows: true } } })).status).toBe(200);
      await t.db.query(`UPDATE record_sync SET lease_owner = NULL, lease_until = NULL WHERE connection_id = $1`, [connection.id]);
    }
    await syncNow('alice');
    expect((await syncState('alice')).lagSeconds).toBe(0);
  });

  it('an expired token mid-run is renewed (renew-on-401) and the listing completes', async () => {
    const { next: start } = await changesFrom(null);
    t.sandbox!.expireAccessTokens({ userId: 'alice' });
    t.sandbox!.setWorkflowStep(workflows.a3, 'Review');
    const state = await syncNow('alice');
    expect(state.lastError).toBeUndefined();
    expect((await changesFrom(start)).items.map((c) => `${c.id}/${c.action}`)).toEqual([`${workflows.a3}/updated`]);
  });

  it("never serves one user's copy for another, nor across tenants", async () => {
    const notHers = await t.request<ErrorBody>('GET', `/v1/tenants/acme/records/workflows/${workflows.b1}?userId=alice`);
    expect(notHers.status).toBe(404);
    expect(notHers.body.error.code).toBe('record_not_found');
    const nobody = await t.request<ErrorBody>('GET', '/v1/tenants/acme/records/workflows?userId=zed');
    expect(nobody.status).toBe(409);
    expect(nobody.body.error.code).toBe('user_not_connected');
    const noUser = await t.request<ErrorBody>('GET', `/v1/tenants/acme/records/workflows/${workflows.a1}`);
    expect(noUser.status).toBe(400);
    const otherKey = (await t.request<{ key: string }>('POST', '/v1/tenants/other/api-keys', { body: {} })).body.key;
    const across = await t.request<ErrorBody>('GET', '/v1/tenants/acme/records/workflows?userId=alice', { key: otherKey });
    expect(across.status).toBe(404);
    expect(across.body.error.code).toBe('tenant_not_found');
    const own = await t.request<RecordPage>('GET', '/v1/tenants/other/records/workflows?userId=alice', { key: otherKey });
    expect(own.status).toBe(200);
    expect(own.body.items).toEqual([]);
    const feed = await t.request<ChangePage>('GET', '/v1/tenants/other/records/workflows/changes', { key: otherKey });
    expect(feed.body.items).toEqual([]);
  });

  it('cursors: malformed is 400 validation_failed, older than SYNC_TOMBSTONE_DAYS is 410 cursor_expired', async () => {
    for (const cursor of ['nope', 'Yz', encodeChangeCursor({ writerXid: '1', seq: 1, at: Date.now() }) + 'A']) {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/acme/records/workflows/changes?cursor=${cursor}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const old = encodeChangeCursor({ writerXid: '1', seq: 1, at: Date.now() - 31 * 86_400_000 });
    const expired = await t.request<ErrorBody>('GET', `/v1/tenants/acme/records/workflows/changes?cursor=${old}`);
    expect(expired.status).toBe(410);
    expect(expired.body.error.code).toBe('cursor_expired');
    const badAfter = await t.request<ErrorBody>('GET', '/v1/tenants/acme/records/workflows?after=xyz');
    expect(badAfter.status).toBe(400);
  });

  it("the records page's cursor follows on: changes after it are those the page does not show", async () => {
    const page = await t.request<RecordPage>('GET', '/v1/tenants/acme/records/workflows?userId=bob');
    t.sandbox!.setWorkflowAttribute(workflows.b1, 'value', 42);
    await syncNow('bob');
    const after = await changesFrom(page.body.cursor, 'bob');
    expect(after.items.map((c) => `${c.id}/${c.action}`)).toEqual([`${workflows.b1}/updated`]);
  });

  it('an inbound event naming a workflow reads it again for each user holding it (a hint)', async () => {
    const admin = await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    expect(admin.status).toBe('connected');
    const hook = await t.request('POST', '/v1/tenants/acme/webhooks', { body: { events: ['workflow_step_updated'] } });
    expect(hook.status).toBe(201);
    const { next: start } = await changesFrom(null);
    t.sandbox!.setWorkflowStep(workflows.a2, 'Sign');
    let seen: ChangeItem[] = [];
    await waitUntil('the targeted reads', async () => {
      seen = (await changesFrom(start)).items;
      return seen.length >= 2;
    });
    expect(seen.map((c) => `${c.userId}/${c.id}/${c.action}`).sort()).toEqual([
      `alice/${workflows.a2}/updated`,
      `bob/${workflows.a2}/updated`,
    ]);
    expect(seen.every((c) => c.data?.step === 'Sign')).toBe(true);
  });

  it("a deleted connection takes the user's records, tombstones and feed with it", async () => {
    const conn = await t.db.query<{ id: string }>(`SELECT id FROM connections WHERE tenant_id = 'acme' AND user_id = 'bob'`);
    const del = await t.request('DELETE', `/v1/tenants/acme/connections/${conn.rows[0].id}`);
    expect(del.status).toBe(204);
    for (const table of ['records', 'record_changes', 'record_sync']) {
      const left = await t.db.query(`SELECT 1 FROM ${table} WHERE tenant_id = 'acme' AND user_id = 'bob'`);
      expect(left.rowCount).toBe(0);
    }
    expect((await records('alice')).length).toBe(3);
  });

  it('erasing a user takes their records, feed, sync state and record events with them', async () => {
    expect((await records('alice')).length).toBeGreaterThan(0);
    expect((await events('record.changed')).some((e) => e.payload.userId === 'alice')).toBe(true);
    const erased = await t.request('DELETE', '/v1/tenants/acme/users/alice');
    expect(erased.status).toBeLessThan(300);
    await waitUntil('the erasure', async () => {
      for (const table of ['records', 'record_changes', 'record_sync']) {
        const left = await t.db.query(`SELECT 1 FROM ${table} WHERE tenant_id = 'acme' AND user_id = 'alice'`);
        if (left.rowCount !== 0) return false;
      }
      return true;
    });
    expect((await events('record.changed')).filter((e) => e.payload.userId === 'alice')).toEqual([]);
    expect((await events('sync.ready')).filter((e) => e.payload.userId === 'alice')).toEqual([]);
  });
});
