import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { freePort } from '../src/common/free-port.js';
import { mcpClient, textOf, type MintedSession } from './support/agents.js';
import { MixedLoad, prepareCluster, renewalStorm, settle, type ClusterFixture } from './support/cluster-load.js';
import { authorizeAtSandbox, openCallback } from './support/connect.js';
import { buildPreviousRelease, type BuiltRelease } from './support/previous-release.js';
import { ROOT, spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createEmptyDatabase, createTestDatabase } from './support/test-database.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const STORM = 300;

/**
 * Two versions on one schema (docs/operations.md): the previous release, built from git history, and this one run
 * side by side on this one's schema (every migration applied) through renewal storms and a mixed load, as during
 * a rolling upgrade. Nothing may be lost, forwarded twice, renewed twice or sent to reauth_required. Then the upgrade
 * itself, with data: what the previous release wrote on its own schema is this release's after its migrations, and
 * the previous release still serves it after a rollback.
 */
describe('the previous release and this one on one schema', () => {
  let release: BuiltRelease;
  let sandbox: SandboxServer;
  let sink: WebhookSink;
  let db: pg.Pool;
  let fixture: ClusterFixture;
  const apps: SpawnedApp[] = [];
  const vaultKeys = testVaultKey('two');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;

  beforeAll(async () => {
    release = await buildPreviousRelease();
    const databaseUrl = await createTestDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'], recordLimit: 5000 });
    sink = await WebhookSink.start();
    const env = (name: string) =>
      spawnedEnv(name, databaseUrl, sandbox, operatorKey, {
        VAULT_KEYS: vaultKeys,
        DATABASE_POOL_SIZE: '8',
        REFRESH_BATCH_SIZE: '25',
        // A token call timed out on a starved machine is retried with the same refresh token, which the upstream
        // may have rotated already: generous timeouts keep this test about two versions, not about a busy CPU
        // (as test/rolling-restart.e2e-spec.ts).
        REFRESH_LEASE_MS: '30000',
        UPSTREAM_TOKEN_TIMEOUT_MS: '10000',
        EVENTS_POLL_INTERVAL_MS: '500',
        EVENTS_RELAY_INTERVAL_MS: '100',
      });
    // The previous release first: it finds every migration of this one applied, and none it does not know pending.
    apps.push(await spawnApp(env('previous'), { command: [process.execPath, release.mainJs], cwd: release.dir, readyTimeoutMs: 60_000 }));
    apps.push(await spawnApp(env('current'), { readyTimeoutMs: 60_000 }));
    fixture = await prepareCluster(apps[1].url, db, { operatorKey, vaultKeys, sandbox, sink, storm: STORM });
  }, 300_000);

  afterAll(async () => {
    // A drain that has not ended in 30 s (a starved machine) is cut short: the test's verdict is already in.
    await Promise.all(
      apps.map(async (a) => {
        const cut = setTimeout(() => void a.stop('SIGKILL'), 30_000);
        try {
          await a.stop('SIGTERM');
        } finally {
          clearTimeout(cut);
        }
      }),
    );
    await sink?.close();
    await sandbox?.close();
    await db?.end();
  }, 60_000);

  it('serves a mixed load and two renewal storms with nothing lost, doubled or reused', async () => {
    sandbox.setFault({ mode: 'slow', delayMs: 50, paths: ['/oauth/token'] });
    const load = new MixedLoad(fixture, (n) => apps[n % apps.length].url);
    load.start();
    const renewedBy = new Map<string, number>();
    for (let storm = 0; storm < 2; storm++) {
      const since = new Date();
      expect(await renewalStorm(db)).toBe(STORM);
      const outcome = await settle(db, load, sink, sandbox);
      expect(outcome.reauthRequired).toBe(0);
      const rows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE last_refreshed_at >= $1`, [since]);
      renewedBy.set(`storm ${storm + 1}`, rows.rows[0].n);
    }
    await load.stop();
    sandbox.setFault(null);
    const outcome = await settle(db, load, sink, sandbox);
    console.log(
      `two versions (${release.version} at ${release.commit.slice(0, 7)} and this checkout) on one schema: ` +
        `${load.total} client requests (${JSON.stringify(load.counts)}), ${load.failures.length} failed; renewed ${JSON.stringify(Object.fromEntries(renewedBy))} of ${STORM}; ` +
        `${load.acked.size} inbound deliveries acknowledged, ${outcome.lost} lost, ${outcome.forwardedTwice} forwarded twice; ` +
        `${outcome.refreshReuses} refresh tokens used twice, ${outcome.reauthRequired} reauth_required, ${outcome.leasesLeft} leases left`,
    );
    expect(load.failures.slice(0, 5)).toEqual([]);
    expect(load.counts.inbound).toBeGreaterThan(20);
    expect(load.counts.uploads).toBeGreaterThan(20);
    for (const n of renewedBy.values()) expect(n).toBe(STORM);
    expect(outcome).toEqual({ lost: 0, forwardedTwice: 0, reauthRequired: 0, refreshReuses: 0, leasesLeft: 0 });
  }, 180_000);
});

/** One JSON call to a spawned instance; throws on a network error only. */
async function call<T>(
  base: string,
  method: string,
  path: string,
  key: string,
  o: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(o.body === undefined ? {} : { 'content-type': 'application/json' }), ...o.headers },
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

describe('an upgrade from the previous release, with its data', () => {
  const TENANT = 'upgraded';
  let release: BuiltRelease;
  let sandbox: SandboxServer;
  let sink: WebhookSink;
  let db: pg.Pool;
  let databaseUrl: string;
  let port: number;
  let running: SpawnedApp | null = null;
  // Every instance started, so that one left running by a failed step is stopped (and frees the port) in afterAll.
  const started: SpawnedApp[] = [];
  const vaultKeys = testVaultKey('upgrade');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  // What the previous release made, found again after the upgrade.
  let tenantKey = '';
  const connectionOf = new Map<string, string>();
  let eventIds: string[] = [];

  const base = () => `http://127.0.0.1:${port}`;
  /** The timestamps of the migrations the database has applied, in order. */
  const appliedMigrations = async () =>
    (await db.query<{ timestamp: string }>(`SELECT timestamp::text AS timestamp FROM migrations ORDER BY timestamp`)).rows.map(
      (r) => r.timestamp,
    );
  const env = (name: string) =>
    spawnedEnv(name, databaseUrl, sandbox, operatorKey, {
      VAULT_KEYS: vaultKeys,
      PORT: String(port),
      PUBLIC_URL: base(),
      EVENTS_POLL_INTERVAL_MS: '500',
      EVENTS_RELAY_INTERVAL_MS: '100',
    });
  const start = async (name: 'previous' | 'current') => {
    // One instance at a time on the port: another one still answering /health/ready would pass for the new one.
    expect(running).toBeNull();
    const app = await spawnApp(
      env(`upgrade-${name}`),
      name === 'previous'
        ? { command: [process.execPath, release.mainJs], cwd: release.dir, readyTimeoutMs: 60_000 }
        : { readyTimeoutMs: 90_000 },
    );
    started.push(app);
    return app;
  };
  const stop = async () => {
    const app = running;
    running = null;
    expect(await app?.stop('SIGTERM')).toBe(0);
  };

  /** A user's connection through the OAuth flow, as a browser drives it: the connect link, the sandbox's consent, the callback. */
  async function connect(userId: string, as: string): Promise<string> {
    const session = await call<{ connectUrl: string }>(base(), 'POST', `/v1/tenants/${TENANT}/connect-sessions`, tenantKey, {
      body: { kind: 'user', userId, returnUrl: 'http://localhost:5173/done' },
    });
    expect(session.status).toBe(201);
    const back = await openCallback(await authorizeAtSandbox(session.body.connectUrl, as, 'approve'));
    const location = new URL(back.headers.get('location') ?? 'about:blank');
    expect([back.status, location.searchParams.get('status')]).toEqual([302, 'connected']);
    return location.searchParams.get('connectionId') ?? '';
  }

  /** GET /me through the facade for `userId`: the upstream's userinfo, with that user's token. */
  const me = (userId: string) =>
    call<{ username?: string }>(base(), 'GET', `/v1/tenants/${TENANT}/me`, tenantKey, { headers: { 'x-user-id': userId } });

  beforeAll(async () => {
    release = await buildPreviousRelease();
    databaseUrl = await createEmptyDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    port = await freePort();
    sandbox = await SandboxServer.start({ redirectUris: [`${base()}/oauth/callback`] });
    sink = await WebhookSink.start();
  }, 300_000);

  afterAll(async () => {
    await Promise.all(started.map((app) => (app.proc.exitCode === null && app.proc.signalCode === null ? app.stop('SIGKILL') : null)));
    await sink?.close();
    await sandbox?.close();
    await db?.end();
  }, 60_000);

  it('the previous release, on a fresh database, makes a tenant, a key, two connections and their events', async () => {
    running = await start('previous');
    const created = await call<{ id: string }>(base(), 'POST', '/v1/tenants', operatorKey, {
      body: {
        id: TENANT,
        name: 'Upgraded',
        environment: 'sandbox',
        allowedReturnUrls: ['http://localhost:5173/'],
        eventsTargetUrl: sink.url,
      },
    });
    expect(created.status).toBe(201);
    const key = await call<{ key: string }>(base(), 'POST', `/v1/tenants/${TENANT}/api-keys`, operatorKey, { body: { name: 'backend' } });
    expect(key.status).toBe(201);
    tenantKey = key.body.key;
    for (const [userId, as] of [
      ['u-alice', 'alice'],
      ['u-bob', 'bob'],
    ]) {
      connectionOf.set(userId, await connect(userId, as));
      expect((await me(userId)).body.username).toBe(as);
    }
    // Each connection's connection.created event, delivered by the previous release.
    const delivered = await waitUntil('the two connection.created events delivered', () => {
      const d = sink.accepted().filter((x) => x.body.type === 'connection.created');
      return d.length >= 2 ? d : null;
    });
    eventIds = delivered.map((d) => String(d.headers['webhook-id'])).sort();
    expect(eventIds).toHaveLength(2);
    await stop();
    // Its own schema only: exactly the migrations it ships, none of this release's newer ones.
    expect(await appliedMigrations()).toEqual(migrationsIn(release.dir));
  }, 180_000);

  it('this release migrates that database and serves all of it: key, tenant, connections (renewed, called), events (listed, redelivered)', async () => {
    expect(eventIds).toHaveLength(2);
    running = await start('current');
    // This release says which it is, in its banner and on /health/live: package.json's version and this build's
    // commit, not the previous release's (between releases the version is still the previous one's: the commit tells).
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const live = await call<{ version: string; commit: string }>(base(), 'GET', '/health/live', operatorKey);
    expect([live.status, live.body.version]).toEqual([200, version]);
    expect(release.commit.startsWith(live.body.commit)).toBe(false);
    expect(running.output.join('')).toContain(`version ${version}, commit `);
    // Every migration of this checkout applied on top of the previous release's.
    expect(await appliedMigrations()).toEqual(migrationsIn(ROOT));

    const tenant = await call<{ id: string; eventsTargetUrl: string }>(base(), 'GET', `/v1/tenants/${TENANT}`, tenantKey);
    expect([tenant.status, tenant.body.eventsTargetUrl]).toEqual([200, sink.url]);

    const list = await call<{ connections: Array<{ id: string; userId: string; status: string }> }>(
      base(),
      'GET',
      `/v1/tenants/${TENANT}/connections`,
      tenantKey,
    );
    expect(list.status).toBe(200);
    expect(list.body.connections.map((c) => [c.userId, c.id, c.status]).sort()).toEqual([
      ['u-alice', connectionOf.get('u-alice'), 'active'],
      ['u-bob', connectionOf.get('u-bob'), 'active'],
    ]);

    // The pair sealed by the previous release opens: a forced renewal spends its refresh token, and the new pair serves.
    const before = await db.query<{ version: number }>(`SELECT version::int AS version FROM connections WHERE id = $1`, [
      connectionOf.get('u-alice'),
    ]);
    const renewed = await call(base(), 'POST', `/v1/tenants/${TENANT}/connections/${connectionOf.get('u-alice')}/refresh`, tenantKey);
    expect(renewed.status).toBe(200);
    const after = await db.query<{ version: number }>(`SELECT version::int AS version FROM connections WHERE id = $1`, [
      connectionOf.get('u-alice'),
    ]);
    expect(after.rows[0].version).toBeGreaterThan(before.rows[0].version);
    expect([(await me('u-alice')).body.username, (await me('u-bob')).body.username]).toEqual(['alice', 'bob']);

    const events = await call<{ events: Array<{ id: string; type: string; delivery: { state: string } }> }>(
      base(),
      'GET',
      `/v1/tenants/${TENANT}/events`,
      tenantKey,
    );
    expect(events.status).toBe(200);
    expect(
      events.body.events
        .filter((e) => eventIds.includes(e.id))
        .map((e) => [e.id, e.type, e.delivery.state])
        .sort(),
    ).toEqual(eventIds.map((id) => [id, 'connection.created', 'delivered']));
    const redelivered = await call(base(), 'POST', `/v1/tenants/${TENANT}/events/${eventIds[0]}/redeliver`, tenantKey);
    expect(redelivered.status).toBe(202);
    await waitUntil('the redelivery of an event the previous release stored', () =>
      sink.accepted().filter((d) => d.headers['webhook-id'] === eventIds[0]).length >= 2 ? true : null,
    );
  }, 180_000);

  it("this release's audit trail and agent sessions work on the previous release's tenant and connections", async () => {
    expect(running).not.toBeNull();
    const minted = await call<MintedSession>(base(), 'POST', `/v1/tenants/${TENANT}/agent-sessions`, tenantKey, {
      body: { userId: 'u-alice', tools: ['read'] },
    });
    expect(minted.status).toBe(201);
    const client = await mcpClient(minted.body.mcpUrl, minted.body.token);
    try {
      const result = await client.callTool({ name: 'facadeMe', arguments: {} });
      expect([result.isError ?? false, (JSON.parse(textOf(result)) as { username?: string }).username]).toEqual([false, 'alice']);
    } finally {
      await client.close();
    }
    const sessions = await call<{ items: Array<{ id: string; userId: string }> }>(
      base(),
      'GET',
      `/v1/tenants/${TENANT}/agent-sessions`,
      tenantKey,
    );
    expect([sessions.status, sessions.body.items.map((x) => [x.id, x.userId])]).toEqual([200, [[minted.body.id, 'u-alice']]]);
    const audit = await call<{ items: Array<{ action: string; target: string | null; userId: string | null; outcome: string }> }>(
      base(),
      'GET',
      `/v1/tenants/${TENANT}/audit`,
      tenantKey,
    );
    expect(audit.status).toBe(200);
    expect(audit.body.items.map((r) => [r.action, r.outcome]).sort()).toEqual(
      expect.arrayContaining([
        ['agent.tool_call', 'success'],
        ['agent_session.created', 'success'],
      ]),
    );
    await stop();
  }, 120_000);

  it('the previous release, rolled back onto the migrated schema, still serves what both wrote', async () => {
    // This release alone sealed with the tenants' data keys, which the previous release cannot open: the rollback's
    // first step moves every value back to the ring (docs/keys.md, "Rolling upgrade from 0.2.0").
    const back = spawnSync('npx', ['tsx', 'src/cli.ts', 'vault:reencrypt', '--to-ring'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'test', ...env('rollback') },
    });
    expect([back.status, back.stdout]).toEqual([0, expect.stringContaining('in the format release 0.2.0 reads')]);
    const envelope = await db.query(
      `SELECT 1 FROM connections WHERE access_token_enc LIKE 'v2.%' OR refresh_token_enc LIKE 'v2.%'
       UNION ALL SELECT 1 FROM tenants WHERE events_secret_enc LIKE 'v2.%'`,
    );
    expect(envelope.rowCount).toBe(0);
    running = await start('previous');
    const list = await call<{ connections: Array<{ id: string; status: string }> }>(
      base(),
      'GET',
      `/v1/tenants/${TENANT}/connections`,
      tenantKey,
    );
    expect(list.body.connections.map((c) => c.status)).toEqual(['active', 'active']);
    // Alice's pair is the one this release renewed.
    expect((await me('u-alice')).body.username).toBe('alice');
    const events = await call<{ events: Array<{ id: string }> }>(base(), 'GET', `/v1/tenants/${TENANT}/events`, tenantKey);
    expect(events.body.events.map((e) => e.id)).toEqual(expect.arrayContaining(eventIds));
    await stop();
  }, 120_000);
});

/** The timestamps of the migrations a checkout ships (`migrations/<unix-ms>-<Name>.ts`), in order. */
function migrationsIn(dir: string): string[] {
  return readdirSync(join(dir, 'migrations'))
    .map((name) => /^(\d+)-\w+\.ts$/.exec(name)?.[1])
    .filter((t): t is string => t !== undefined)
    .sort();
}
