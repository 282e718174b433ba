import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { seedConnections } from './support/seed-connections.js';
import { newTenantAt } from './support/connect.js';
import { buildApp, spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';
import { waitUntil } from './support/webhook-sink.js';

const USERS = ['alice', 'bob', 'carol'];
const PER_USER = 400;
const PAGE = 20;

interface SyncItem {
  userId: string;
  state: string;
  records: number;
  lastListedAt: string | null;
}
interface ChangeItem {
  id: string;
  userId: string;
  action: string;
}

/**
 * Two instances (separate processes) on one database: the one listing users is SIGKILLed part way; its leases run
 * out and the other lists them. After that, every user's copy equals what their token lists, nothing was deleted,
 * and each workflow of each user is `added` exactly once in the feed.
 */
describe('synced records across instances: a kill of the instance listing (API.md 12)', () => {
  let sandbox: SandboxServer;
  let db: pg.Pool;
  let env: Record<string, string>;
  const instances: SpawnedApp[] = [];
  const vaultKeys = testVaultKey('records');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;

  async function call<T>(app: SpawnedApp, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${operatorKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  beforeAll(async () => {
    buildApp();
    const databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'], recordLimit: 5000 });
    for (const user of USERS) sandbox.bulkCreateWorkflows(user, PER_USER);
    sandbox.setListing({ pageSize: PAGE });
    env = spawnedEnv('records', databaseUrl, sandbox, operatorKey, {
      VAULT_KEYS: vaultKeys,
      SYNC_WORKFLOWS: 'on',
      SYNC_POLL_INTERVAL: '5s',
    });
  }, 180_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGTERM').catch(() => null)));
    await db?.end();
    await sandbox?.close();
  }, 60_000);

  it("after a SIGKILL part way, another instance completes every listing: the copy equals each token's list, each workflow added once", async () => {
    const victim = await spawnApp({ ...env, INSTANCE_ID: 'victim' }, { readyTimeoutMs: 60_000 });
    instances.push(victim);
    await newTenantAt(victim.url, operatorKey, 'acme');
    // Slow pages: the listing of 20 pages per user lasts long enough to be cut.
    sandbox.setFault({ mode: 'slow', delayMs: 150, paths: ['/workflows'] });
    await seedConnections(
      db,
      vaultKeys,
      USERS.map((user) => ({ tenantId: 'acme', userId: user, upstreamUserId: user, tokens: sandbox.issueTokens(user) })),
    );
    expect((await call(victim, 'POST', '/v1/tenants/acme/sync', {})).status).toBe(202);
    await waitUntil(
      'the victim listing part of the users',
      async () => {
        // A page's records and the listing's progress commit one after the other: wait for a progress saved, so
        // that the kill lands part way through a listing whose place is known.
        const r = await db.query<{ n: number; held: number }>(
          `SELECT (SELECT count(*)::int FROM records) AS n,
                  (SELECT count(*)::int FROM record_sync WHERE lease_owner = 'victim' AND resume_path IS NOT NULL AND resume_path <> '') AS held`,
        );
        return r.rows[0].n >= PAGE && r.rows[0].held > 0;
      },
      30_000,
      20,
    );
    await victim.stop('SIGKILL');
    const cut = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM records`);
    expect(cut.rows[0].n).toBeLessThan(USERS.length * PER_USER);

    // Where the victim's listings stood: the survivor goes on from there, it does not start over.
    const stood = await db.query<{ user_id: string; resume_path: string }>(
      `SELECT user_id, resume_path FROM record_sync WHERE resume_path IS NOT NULL AND resume_path <> ''`,
    );
    expect(stood.rows.length).toBeGreaterThan(0);
    sandbox.clearRecords();
    sandbox.setFault(null);
    const survivor = await spawnApp({ ...env, INSTANCE_ID: 'survivor' }, { readyTimeoutMs: 60_000 });
    instances.push(survivor);
    await waitUntil(
      'every user listed completely',
      async () => {
        const res = await call<{ items: SyncItem[] }>(survivor, 'GET', '/v1/tenants/acme/sync');
        return res.body.items.length === USERS.length && res.body.items.every((s) => s.state === 'ready' && s.records === PER_USER);
      },
      90_000,
      250,
    );

    for (const { user_id: user, resume_path: resumed } of stood.rows) {
      const first = sandbox.records().find((r) => r.path === '/workflows' && r.tokenUserId === user);
      expect(first && `/workflows?${first.query}`).toBe(resumed);
    }

    for (const user of USERS) {
      const token = sandbox.issueTokens(user).access_token;
      const listed = new Set<string>();
      for (let url: string | null = `${sandbox.url}/workflows`; url;) {
        const res: Response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as Array<{ id: string }> | { workflows: Array<{ id: string }> };
        for (const w of Array.isArray(body) ? body : body.workflows) listed.add(w.id);
        const next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '');
        url = next ? new URL(next[1], url).toString() : null;
      }
      const copy = new Set<string>();
      for (let after: string | null = null, first = true; first || after; first = false) {
        const q: string = after ? `&after=${after}` : '';
        const res = await call<{ items: Array<{ id: string }>; next: string | null }>(
          survivor,
          'GET',
          `/v1/tenants/acme/records/workflows?userId=${user}&limit=1000${q}`,
        );
        for (const r of res.body.items) copy.add(r.id);
        after = res.body.next;
      }
      expect([...copy].sort()).toEqual([...listed].sort());
    }

    const feed: ChangeItem[] = [];
    for (let cursor: string | null = null; ;) {
      const q: string = cursor ? `&cursor=${cursor}` : '';
      const res = await call<{ items: ChangeItem[]; next: string }>(
        survivor,
        'GET',
        `/v1/tenants/acme/records/workflows/changes?limit=1000${q}`,
      );
      feed.push(...res.body.items);
      cursor = res.body.next;
      if (res.body.items.length < 1000) break;
    }
    expect(feed.filter((c) => c.action !== 'added')).toEqual([]);
    const keys = feed.map((c) => `${c.userId}/${c.id}`);
    expect(keys.length).toBe(USERS.length * PER_USER);
    expect(new Set(keys).size).toBe(keys.length);
    const ready = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'sync.ready'`);
    expect(ready.rows[0].n).toBe(USERS.length);
  }, 240_000);
});
