import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { openAccessToken, seedConnections, type SeededConnection } from './support/seed-connections.js';
import { newTenantAt } from './support/connect.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';

const TTL_S = 20;
const CONNECTIONS = 300;
const USERS = ['admin', 'alice', 'bob', 'carol', 'dave'];

/**
 * Three cws-connect processes on one database, 300 connections whose tokens live 20 s, three lifetimes:
 * every connection renewed once per cycle, never twice, never late; then one instance is SIGKILLed in the
 * middle of a renewal storm and restarted.
 */
describe('renewal across three instances (separate processes)', () => {
  let sandbox: SandboxServer;
  let db: pg.Pool;
  let databaseUrl: string;
  let env: Record<string, string>;
  let seeded: SeededConnection[] = [];
  const instances: SpawnedApp[] = [];
  const vaultKeys = testVaultKey('cluster');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    sandbox = await SandboxServer.start({
      redirectUris: ['http://127.0.0.1:1/oauth/callback'],
      accessTokenTtlSeconds: TTL_S,
      recordLimit: 1000,
    });
    env = spawnedEnv('cluster', databaseUrl, sandbox, operatorKey, {
      DATABASE_POOL_SIZE: '10',
      VAULT_KEYS: vaultKeys,
      REFRESH_BATCH_SIZE: '25',
      REFRESH_CONCURRENCY: '8',
      REFRESH_LEASE_MS: '5000',
      REFRESH_MARGIN_MS: '2000',
      UPSTREAM_TOKEN_TIMEOUT_MS: '2000',
      UPSTREAM_CONNECT_TIMEOUT_MS: '500',
    });
    instances.push(...(await Promise.all([0, 1, 2].map(() => spawnApp(env, { readyTimeoutMs: 60_000 })))));
    await newTenantAt(instances[0].url, operatorKey, 'acme');
  }, 120_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGTERM')));
    await db?.end();
    await sandbox?.close();
  }, 60_000);

  it('renews every connection once per cycle for three lifetimes: no reuse, never late', async () => {
    const items = Array.from({ length: CONNECTIONS }, (_, i) => {
      const user = USERS[i % USERS.length];
      return { tenantId: 'acme', userId: `u-${i}`, upstreamUserId: user, tokens: sandbox.issueTokens(user) };
    });
    seeded = await seedConnections(db, vaultKeys, items);
    const start = Date.now();
    const end = start + 3 * TTL_S * 1000;

    // Meanwhile, call the upstream with whatever token is stored: it must never be an expired one.
    let calls = 0;
    let unauthorized = 0;
    while (Date.now() < end) {
      await new Promise((r) => setTimeout(r, 1000));
      const sample = await db.query<{ id: string; tenant_id: string; access_token_enc: string }>(
        `SELECT id, tenant_id, access_token_enc FROM connections ORDER BY random() LIMIT 10`,
      );
      await Promise.all(
        sample.rows.map(async (r) => {
          const res = await fetch(`${sandbox.url}/userinfo`, {
            headers: {
              authorization: `Bearer ${await openAccessToken(vaultKeys, db, { id: r.id, tenantId: r.tenant_id }, r.access_token_enc)}`,
            },
          });
          await res.arrayBuffer();
          calls++;
          // A token read just before its renewal commits is replaced under the caller (routing renews on 401).
          if (res.status === 401) unauthorized++;
        }),
      );
    }

    const log = sandbox.refreshLog();
    const byFamily = new Map<string, number[]>();
    for (const entry of log) byFamily.set(entry.family, [...(byFamily.get(entry.family) ?? []), entry.at]);
    const lifetime = TTL_S * 1000;
    const problems: string[] = [];
    const counts = new Map<number, number>();
    for (const s of seeded) {
      const times = (byFamily.get(s.family) ?? []).sort((x, y) => x - y);
      const inWindow = times.filter((t) => t < s.issuedAt.getTime() + 3 * lifetime - 2000);
      counts.set(inWindow.length, (counts.get(inWindow.length) ?? 0) + 1);
      if (inWindow.length !== 3) problems.push(`${s.userId}: ${inWindow.length} renewals in three lifetimes`);
      let previous = s.issuedAt.getTime();
      for (const t of times) {
        if (t >= previous + lifetime) problems.push(`${s.userId}: renewed ${t - previous - lifetime} ms after its token expired`);
        if (t - previous < 0.4 * lifetime) problems.push(`${s.userId}: renewed again after only ${t - previous} ms`);
        previous = t;
      }
    }
    const stats = sandbox.stats();
    console.log(
      `3 instances, ${CONNECTIONS} connections, ${TTL_S}s tokens, ${Math.round((Date.now() - start) / 1000)}s: ` +
        `renewals per connection ${JSON.stringify(Object.fromEntries(counts))}, refreshes ${stats.refreshes}, reuses ${stats.refreshReuses}, ` +
        `expired-token calls ${stats.expiredTokenCalls}, resource calls ${calls} (401 while rotating: ${unauthorized})`,
    );
    expect(problems.slice(0, 10)).toEqual([]);
    expect(stats.refreshReuses).toBe(0);
    expect(stats.expiredTokenCalls).toBe(0);
    const bad = await db.query(`SELECT count(*)::int AS n FROM connections WHERE status <> 'active' OR refresh_failures > 0`);
    expect(bad.rows[0].n).toBe(0);
  }, 120_000);

  it('an instance SIGKILLed during a renewal storm: after its restart every connection is active (or reauth_required with its reason)', async () => {
    const reusesBefore = sandbox.stats().refreshReuses;
    // Slow token answers keep many renewals in flight when the kill lands.
    sandbox.setFault({ mode: 'slow', delayMs: 100, paths: ['/oauth/token'] });
    await db.query(`UPDATE connections SET refresh_due_at = now()`);
    await new Promise((r) => setTimeout(r, 400));
    const victim = instances[2];
    await victim.stop('SIGKILL');
    sandbox.setFault(null);
    instances[2] = await spawnApp(env, { port: victim.port, readyTimeoutMs: 60_000 });

    const deadline = Date.now() + 30_000;
    for (;;) {
      const pending = await db.query(
        `SELECT count(*)::int AS n FROM connections WHERE status = 'active' AND (refresh_due_at <= now() OR lease_owner IS NOT NULL)`,
      );
      if (pending.rows[0].n === 0) break;
      if (Date.now() > deadline) throw new Error(`${pending.rows[0].n} connections still not renewed`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const statuses = await db.query<{ status: string; status_reason: string | null; n: number }>(
      `SELECT status, status_reason, count(*)::int AS n FROM connections GROUP BY 1, 2 ORDER BY 1`,
    );
    const reauth = statuses.rows.filter((r) => r.status === 'reauth_required').reduce((sum, r) => sum + r.n, 0);
    const reuses = sandbox.stats().refreshReuses - reusesBefore;
    console.log(
      `SIGKILL during a storm of ${CONNECTIONS} renewals: ${CONNECTIONS - reauth} active, ${reauth} reauth_required ` +
        `(rotations cut between the upstream's answer and our COMMIT; refresh-token reuses seen by the upstream: ${reuses})`,
    );
    for (const r of statuses.rows) {
      expect(['active', 'reauth_required']).toContain(r.status);
      if (r.status === 'reauth_required') expect(r.status_reason).toBe('refresh_token_rejected');
    }
    // Each cut rotation shows up exactly once, as the one reuse that revealed it; nothing else was reused.
    expect(reuses).toBe(reauth);
    expect(reauth).toBeLessThanOrEqual(8);
    const events = await db.query(`SELECT count(*)::int AS n FROM events WHERE type = 'connection.reauth_required'`);
    expect(events.rows[0].n).toBe(reauth);
  }, 90_000);
});
