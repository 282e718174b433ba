import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { MixedLoad, prepareCluster, renewalStorm, settle, type ClusterFixture } from './support/cluster-load.js';
import { buildPreviousRelease, type BuiltRelease } from './support/previous-release.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';
import { WebhookSink } from './support/webhook-sink.js';

const STORM = 300;

/**
 * Two versions on one schema (docs/operations.md): the previous release, built from git history, and this one run
 * side by side on this one's schema (every migration applied) through renewal storms and a mixed load, as during
 * a rolling upgrade. Nothing may be lost, forwarded twice, renewed twice or sent to reauth_required.
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
