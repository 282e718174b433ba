import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { MixedLoad, prepareCluster, type ClusterFixture } from './support/cluster-load.js';
import { backUp, type Backup } from './support/backup.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

/**
 * The sandbox's access tokens live five minutes (renewed at 0.8: after four): nothing falls due during the test but the
 * renewals it makes due, so which connections were renewed since the backup is known.
 */
const TTL_SECONDS = 300;
/** storm-0..2: renewed after the backup by a forced refresh; storm-3..5: by the scheduler; storm-6..8 and u-alice: not renewed. */
const STORM = 9;
const FORCED = ['storm-0', 'storm-1', 'storm-2'];
const SCHEDULED = ['storm-3', 'storm-4', 'storm-5'];
const REFRESH_INTERVAL_MS = 200;

interface ConnectionBody {
  id: string;
  status: string;
  statusReason?: string | null;
}
interface ErrorBody {
  error: { code: string };
}

/**
 * An operator restores a backup (docs/operations.md, "Backups and restore"): the service under load on a fresh database,
 * a pg_dump (custom format) taken meanwhile, more renewals and events after it, then the service stopped and started
 * on the dump restored into a fresh database, with the same keys, against the same upstream, which has rotated the
 * refresh tokens of the connections renewed since the backup. On the embedded PostgreSQL of a run without
 * DATABASE_URL, for which no pg_dump may be installed, the backup is an online base backup instead (backup.ts).
 */
describe('a backup restored', () => {
  let sandbox: SandboxServer;
  let sink: WebhookSink;
  let live: pg.Pool;
  let restored: pg.Pool | undefined;
  let app: SpawnedApp | undefined;
  let fixture: ClusterFixture;
  let env: Record<string, string>;
  let backup: Backup | undefined;
  let dumpDir: string;
  const vaultKeys = testVaultKey('restore');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const idOf = new Map<string, string>();
  const familyOf = new Map<string, string>();

  // What the first phase leaves for the assertions after the restore.
  const state = {
    ackedBeforeBackup: new Set<string>(),
    ackedAfterBackup: new Set<string>(),
    restoreMark: 0,
    refreshCallsAtRestore: new Map<string, { granted: number; refused: number }>(),
    restoredVersion: new Map<string, number>(),
    renewedSinceBackup: [] as string[],
    restoredEventState: new Map<string, string>(),
    keyCreatedAfterBackup: '',
  };

  const api = async <T>(method: string, path: string, init: { userId?: string; key?: string } = {}) => {
    const headers: Record<string, string> = { authorization: `Bearer ${init.key ?? operatorKey}` };
    if (init.userId) headers['x-user-id'] = init.userId;
    const res = await fetch(`${app!.url}${path}`, { method, headers });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  };
  const tenantPath = () => `/v1/tenants/${fixture.tenantId}`;
  const connectionOf = (userId: string) => api<ConnectionBody>('GET', `${tenantPath()}/connections/${idOf.get(userId)}`);
  const facadeMe = (userId: string) => api<ErrorBody>('GET', `${tenantPath()}/me`, { userId });
  const forceRefresh = (userId: string) =>
    api<ConnectionBody & ErrorBody>('POST', `${tenantPath()}/connections/${idOf.get(userId)}/refresh`);
  const versions = async (db: pg.Pool) =>
    new Map(
      (await db.query<{ user_id: string; version: string }>(`SELECT user_id, version FROM connections`)).rows.map((r) => [
        r.user_id,
        Number(r.version),
      ]),
    );
  /** The partner's accepted deliveries among its requests from..to (indexes in sink.received). */
  const accepted = (from = 0, to = sink.received.length) => sink.received.slice(from, to).filter((d) => d.status >= 200 && d.status < 300);
  const acceptedIds = (from = 0, to?: number) => new Set(accepted(from, to).map((d) => String(d.headers['webhook-id'])));
  const callsSinceRestore = (userId: string) => {
    const now = sandbox.refreshCalls(familyOf.get(userId)!);
    const then = state.refreshCallsAtRestore.get(userId)!;
    return { granted: now.granted - then.granted, refused: now.refused - then.refused };
  };
  const allUsers = () => [...idOf.keys()];
  const notRenewed = () => allUsers().filter((u) => !state.renewedSinceBackup.includes(u));

  beforeAll(async () => {
    const databaseUrl = await createTestDatabase();
    live = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    sandbox = await SandboxServer.start({
      redirectUris: ['http://127.0.0.1:1/oauth/callback'],
      accessTokenTtlSeconds: TTL_SECONDS,
      recordLimit: 0,
    });
    sink = await WebhookSink.start();
    dumpDir = mkdtempSync(join(tmpdir(), 'cws-restore-dump-'));
    env = spawnedEnv('restore', databaseUrl, sandbox, operatorKey, {
      VAULT_KEYS: vaultKeys,
      REFRESH_INTERVAL_MS: String(REFRESH_INTERVAL_MS),
      // A facade call renews first only in the token's last 5 s: the tokens serve the whole test as they are.
      REFRESH_MARGIN_MS: '5000',
      // Generous on a busy machine: a token call cut by its timeout would be retried with the same refresh token.
      REFRESH_LEASE_MS: '30000',
      UPSTREAM_TOKEN_TIMEOUT_MS: '10000',
      EVENTS_POLL_INTERVAL_MS: '500',
      EVENTS_RELAY_INTERVAL_MS: '100',
      EVENTS_RETRY_BASE_MS: '200',
      EVENTS_RETRY_MAX_MS: '1000',
      EVENTS_ATTEMPT_TIMEOUT_MS: '3000',
      EVENTS_JOB_EXPIRE_SECONDS: '5',
      EVENTS_MAINTENANCE_SECONDS: '1',
    });
    app = await spawnApp(env, { readyTimeoutMs: 60_000 });
    fixture = await prepareCluster(app.url, live, { operatorKey, vaultKeys, sandbox, sink, storm: STORM });
    for (const c of fixture.connections) {
      idOf.set(c.userId, c.id);
      familyOf.set(c.userId, c.family);
    }
  }, 120_000);

  afterAll(async () => {
    await app?.stop('SIGTERM');
    await sink?.close();
    await sandbox?.close();
    await live?.end();
    await restored?.end();
    await backup?.close();
    if (dumpDir) rmSync(dumpDir, { recursive: true, force: true });
  }, 60_000);

  it('a backup taken under load (pg_dump, or a base backup on the embedded server); then connections renewed and events delivered after it; the backup restored into a fresh database', async () => {
    const load = new MixedLoad(fixture, () => app!.url, 4);
    load.start();
    await waitUntil('some load delivered', () => load.counts.inbound >= 10 && acceptedIds().size >= 5, 20_000);

    // The partner's endpoint is slow to answer around the backup: the events it is sent then are pending in the dump
    // and delivered after it.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let holding = true;
    sink.wait = () => (holding ? gate : null);
    const heldFrom = sink.received.length;
    await waitUntil('deliveries held at the partner', () => sink.received.length - heldFrom >= 3, 20_000);
    for (const id of load.acked.keys()) state.ackedBeforeBackup.add(id);
    const dumpStarted = Date.now();
    backup = await backUp(env.DATABASE_URL, dumpDir);
    const dumpMs = Date.now() - dumpStarted;
    holding = false;
    release();
    const countAtBackup = load.counts.inbound;

    // After the backup: renewals (forced, and the scheduler's: their renewal falls due now), more events, an API key.
    await live.query(`UPDATE connections SET refresh_due_at = now() WHERE user_id = ANY($1)`, [SCHEDULED]);
    for (const userId of FORCED) {
      const res = await forceRefresh(userId);
      expect([userId, res.status]).toEqual([userId, 200]);
    }
    await waitUntil(
      'the scheduler renewed the connections that fell due',
      async () => {
        const v = await versions(live);
        return SCHEDULED.every((u) => (v.get(u) ?? 0) > 1);
      },
      20_000,
    );
    const key = await api<{ key: string }>('POST', `${tenantPath()}/api-keys`);
    expect(key.status).toBe(201);
    state.keyCreatedAfterBackup = key.body.key;
    expect((await api('GET', `${tenantPath()}/connections`, { key: state.keyCreatedAfterBackup })).status).toBe(200);
    await waitUntil('more events after the backup', () => load.counts.inbound >= countAtBackup + 10, 20_000);
    await load.stop();
    expect(load.failures.slice(0, 5)).toEqual([]);
    for (const id of load.acked.keys()) if (!state.ackedBeforeBackup.has(id)) state.ackedAfterBackup.add(id);
    await waitUntil(
      'every acknowledged delivery at the partner',
      () => {
        const got = acceptedIds();
        return [...load.acked.keys()].every((id) => got.has(id));
      },
      30_000,
      100,
    );
    const finalVersion = await versions(live);
    expect(await app!.stop('SIGTERM')).toBe(0);
    app = undefined;

    // The restore: a fresh database (not a clone of anything), the backup restored into it.
    const restoreStarted = Date.now();
    const restoredUrl = await backup.restore();
    const restoreMs = Date.now() - restoreStarted;
    restored = new pg.Pool({ connectionString: restoredUrl, max: 3 });

    state.restoredVersion = await versions(restored);
    state.renewedSinceBackup = allUsers()
      .filter((u) => finalVersion.get(u)! > state.restoredVersion.get(u)!)
      .sort();
    // Exactly the connections renewed after the backup: the dump's snapshot is from before them, and nothing else renewed.
    expect(state.renewedSinceBackup).toEqual([...FORCED, ...SCHEDULED].sort());
    const events = await restored.query<{ id: string; delivery_state: string }>(`SELECT id, delivery_state FROM events`);
    state.restoredEventState = new Map(events.rows.map((r) => [r.id, r.delivery_state]));
    state.restoreMark = sink.received.length;
    for (const userId of allUsers()) {
      const c = sandbox.refreshCalls(familyOf.get(userId)!);
      state.refreshCallsAtRestore.set(userId, { granted: c.granted, refused: c.refused });
    }
    console.log(
      `backup under load (${backup.method}): ${dumpMs} ms, restore ${restoreMs} ms; ${state.ackedBeforeBackup.size} events acknowledged before the backup, ` +
        `${state.ackedAfterBackup.size} after it; ${events.rowCount} events in the dump, ${[...state.restoredEventState.values()].filter((s) => s !== 'delivered').length} of them not delivered yet`,
    );

    // A restore comes hours after the backup: the scheduled ones are overdue in it, as their renewal fell due (in this
    // test, in seconds) before. The scheduler finds them; the forced ones are found at their first use.
    await restored.query(`UPDATE connections SET refresh_due_at = now() WHERE user_id = ANY($1)`, [SCHEDULED]);
    // The same keys, data directory, operator key and upstream; only the database is the restored one.
    app = await spawnApp({ ...env, DATABASE_URL: restoredUrl }, { readyTimeoutMs: 60_000 });
  }, 120_000);

  it('every connection not renewed since the backup works and renews (its token rotates)', async () => {
    expect(notRenewed().length).toBeGreaterThanOrEqual(4);
    for (const userId of notRenewed()) {
      expect([userId, (await facadeMe(userId)).status]).toEqual([userId, 200]);
      const renewed = await forceRefresh(userId);
      expect([userId, renewed.status, renewed.body.status]).toEqual([userId, 200, 'active']);
      // One token call, granted: the refresh token of the backup was still the live one. The row moved on.
      expect([userId, callsSinceRestore(userId)]).toEqual([userId, { granted: 1, refused: 0 }]);
      const row = await restored!.query<{ version: string }>(`SELECT version FROM connections WHERE id = $1`, [idOf.get(userId)]);
      expect(Number(row.rows[0].version)).toBe(state.restoredVersion.get(userId)! + 1);
      // The new access token serves the next call.
      expect([userId, (await facadeMe(userId)).status]).toEqual([userId, 200]);
    }
    // And the load's user carries a load again.
    const load = new MixedLoad(fixture, () => app!.url, 2);
    load.start();
    await waitUntil('load on the restored service', () => load.counts.inbound >= 5 && load.counts.facade >= 5, 20_000);
    await load.stop();
    expect(load.failures.slice(0, 5)).toEqual([]);
  }, 60_000);

  it('every connection renewed since the backup turns reauth_required at its first use or renewal, with the event, and is not retried', async () => {
    // The forced ones at their first use (a facade call); the scheduled ones, due since before the restore, by the scheduler.
    for (const userId of FORCED) {
      const first = await facadeMe(userId);
      expect([userId, first.status, first.body.error?.code]).toEqual([userId, 409, 'reauth_required']);
    }
    for (const userId of state.renewedSinceBackup) {
      const shown = await waitUntil(
        `${userId} reauth_required`,
        async () => {
          const c = await connectionOf(userId);
          return c.body.status === 'reauth_required' ? c.body : null;
        },
        15_000,
      );
      expect(shown).toMatchObject({ status: 'reauth_required', statusReason: 'refresh_token_rejected' });
      // The upstream was asked once with the spent refresh token (400 invalid_grant), never granted.
      expect([userId, callsSinceRestore(userId)]).toEqual([userId, { granted: 0, refused: 1 }]);
    }
    const reauthEvents = () =>
      accepted(state.restoreMark)
        .filter((d) => d.body.type === 'connection.reauth_required')
        .map((d) => (d.body.data as { connectionId: string }).connectionId);
    await waitUntil('a connection.reauth_required event for each', () =>
      state.renewedSinceBackup.every((u) => reauthEvents().includes(idOf.get(u)!)),
    );
    expect(new Set(reauthEvents())).toEqual(new Set(state.renewedSinceBackup.map((u) => idOf.get(u))));

    // Not retried: a few renewal intervals later, and after more calls and forced renewals, no token call more.
    await new Promise((r) => setTimeout(r, 10 * REFRESH_INTERVAL_MS));
    for (const userId of state.renewedSinceBackup) {
      expect([userId, (await facadeMe(userId)).status]).toEqual([userId, 409]);
      expect([userId, (await forceRefresh(userId)).status]).toEqual([userId, 409]);
      expect([userId, callsSinceRestore(userId)]).toEqual([userId, { granted: 0, refused: 1 }]);
      expect((await connectionOf(userId)).body.status).toBe('reauth_required');
    }
  }, 60_000);

  it('events delivered after the backup are delivered again under their webhook-id; none is lost; what was created since is gone', async () => {
    const inDump = (id: string) => state.restoredEventState.has(id);
    // Every event acknowledged before the backup started is in it.
    expect([...state.ackedBeforeBackup].filter((id) => !inDump(id))).toEqual([]);
    // The events the partner had before the restore that the dump holds as not yet delivered: sent again, same webhook-id.
    const seenBefore = acceptedIds(0, state.restoreMark);
    const again = [...state.restoredEventState].filter(([id, s]) => s !== 'delivered' && seenBefore.has(id)).map(([id]) => id);
    expect(again.length).toBeGreaterThanOrEqual(3);
    await waitUntil(
      'the events pending in the dump delivered again',
      () => {
        const after = acceptedIds(state.restoreMark);
        return again.every((id) => after.has(id));
      },
      30_000,
      100,
    );
    const firstBody = new Map(
      accepted(0, state.restoreMark)
        .map((d) => [String(d.headers['webhook-id']), d.raw] as const)
        .reverse(),
    );
    for (const d of accepted(state.restoreMark)) {
      const id = String(d.headers['webhook-id']);
      if (again.includes(id)) expect(d.raw).toBe(firstBody.get(id));
    }
    // Every event of the dump ends delivered, and the partner holds each; those delivered before the backup are not sent again.
    const upstreamIds = [...state.restoredEventState.keys()];
    await waitUntil(
      'every restored event delivered',
      async () => {
        const r = await restored!.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM events WHERE id = ANY($1::uuid[]) AND delivery_state <> 'delivered'`,
          [upstreamIds],
        );
        return r.rows[0].n === 0;
      },
      30_000,
      200,
    );
    const everAccepted = acceptedIds(0);
    expect(upstreamIds.filter((id) => !everAccepted.has(id))).toEqual([]);
    const resent = acceptedIds(state.restoreMark);
    expect([...state.restoredEventState].filter(([id, s]) => s === 'delivered' && resent.has(id))).toEqual([]);
    // The events received after the backup are not in it: the partner had every one of them before the restore.
    const notInDump = [...state.ackedAfterBackup].filter((id) => !inDump(id));
    expect(notInDump.length).toBeGreaterThan(0);
    expect(notInDump.filter((id) => !seenBefore.has(id))).toEqual([]);
    // An API key created after the backup is gone.
    expect((await api('GET', `${tenantPath()}/connections`, { key: state.keyCreatedAfterBackup })).status).toBe(401);
    console.log(
      `after the restore: ${again.length} events delivered again under their webhook-id, ${notInDump.length} events received after the backup not in it ` +
        `(all at the partner before the restore); ${state.renewedSinceBackup.length} connections reauth_required, one refused token call each`,
    );
  }, 60_000);
});
