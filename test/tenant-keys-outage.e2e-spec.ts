import { randomBytes } from 'node:crypto';
import { readdirSync, renameSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { freePort } from '../src/common/free-port.js';
import { newTenantAt } from './support/connect.js';
import { ensureHaproxy, startHaproxy, type Balancer } from './support/haproxy.js';
import { seedConnections } from './support/seed-connections.js';
import { createSoftHsmToken, type SoftHsmToken } from './support/softhsm.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { quantile, sleep, TenantLoad } from './support/tenant-load.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';

const TENANTS = Array.from({ length: 20 }, (_, i) => `ko-${String(i).padStart(2, '0')}`);
/** Read through both instances before the outage: their data keys are cached there. */
const CACHED = TENANTS.slice(0, 10);
/** Never read since the instances started: their keys must come from the store. */
const COLD = TENANTS.slice(10);
const OUTAGE_MS = 60_000;

/**
 * The key store stopped for 60 s under load, for real: two instances (processes, one PostgreSQL, behind HAProxy)
 * with KEY_STORE=pkcs11 on a SoftHSM2 token whose directory is taken away and put back (the module then finds no
 * token at all, as with a device gone). Tenants whose data key is cached: not one failed call. The others: `503
 * key_store_unavailable`, answered fast. The token back: every tenant served again within 5 s, without a restart.
 */
describe('the key store stopped for 60 s under load (KEY_STORE=pkcs11, SoftHSM2)', () => {
  let sandbox: SandboxServer;
  let db: pg.Pool;
  let lb: Balancer;
  let token: SoftHsmToken;
  let env: Record<string, string>;
  const ports: number[] = [];
  const apps: SpawnedApp[] = [];
  const connections = new Map<string, string>();
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const read = (url: string, tenantId: string) =>
    fetch(`${url}/v1/tenants/${tenantId}/me`, { headers: { authorization: `Bearer ${operatorKey}`, 'x-user-id': 'u-1' } });
  const start = (i: number) =>
    spawnApp({ ...env, INSTANCE_ID: `outage-${i}-${randomBytes(3).toString('hex')}` }, { port: ports[i], readyTimeoutMs: 60_000 });

  beforeAll(async () => {
    ensureHaproxy();
    token = createSoftHsmToken('cws-outage', 'cws-kek');
    const databaseUrl = await createTestDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    const vaultKeys = testVaultKey('ring');
    env = spawnedEnv('outage', databaseUrl, sandbox, operatorKey, {
      ...token.env,
      VAULT_KEYS: vaultKeys,
      DATABASE_POOL_SIZE: '6',
      VAULT_HEARTBEAT_MS: '500',
      // Cached keys go stale during the outage (a background unwrap that fails) and keep serving within the grace.
      KEY_CACHE_TTL: '20s',
      KEY_CACHE_GRACE: '5m',
      REFRESH_SCHEDULER: 'off',
    });
    for (let i = 0; i < 2; i++) ports.push(await freePort());
    apps.push(...(await Promise.all([start(0), start(1)])));
    lb = await startHaproxy(ports);
    for (const p of ports) await lb.waitUp(p);
    for (const tenantId of TENANTS) await newTenantAt(lb.url, operatorKey, tenantId);
    const seeded = await seedConnections(
      db,
      vaultKeys,
      TENANTS.map((tenantId) => ({ tenantId, userId: 'u-1', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') })),
    );
    TENANTS.forEach((t, i) => connections.set(t, seeded[i].id));
    // Each pair renewed by an instance: sealed with its tenant's data key, wrapped on the token.
    for (const tenantId of TENANTS) {
      const res = await fetch(`${lb.url}/v1/tenants/${tenantId}/connections/${connections.get(tenantId)}/refresh`, {
        method: 'POST',
        headers: { authorization: `Bearer ${operatorKey}` },
      });
      if (res.status !== 200) throw new Error(`refresh answered ${res.status}: ${await res.text()}`);
    }
    // Fresh memory, then only CACHED read through each instance.
    for (let i = 0; i < 2; i++) {
      await apps[i].stop('SIGTERM');
      apps[i] = await start(i);
      await lb.waitUp(ports[i]);
    }
    for (const app of apps) for (const tenantId of CACHED) expect((await read(app.url, tenantId)).status).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop('SIGTERM')));
    await lb?.close();
    await sandbox?.close();
    await db?.end();
  }, 60_000);

  it('cached tenants: 0 failed calls; the others: 503 key_store_unavailable within 1.2 s; all served again within 5 s of its return', async () => {
    const formats = await db.query<{ f: string; n: number }>(
      `SELECT split_part(access_token_enc, '.', 1) AS f, count(*)::int AS n FROM connections GROUP BY 1`,
    );
    expect(formats.rows).toEqual([{ f: 'v2', n: TENANTS.length }]);
    const cached = new TenantLoad(
      () => lb.url,
      operatorKey,
      CACHED,
      (t) => connections.get(t) ?? '',
      4,
    );
    const cold = new TenantLoad(
      () => lb.url,
      operatorKey,
      COLD,
      (t) => connections.get(t) ?? '',
      2,
      new Set(COLD),
    );
    cold.renewing = false;
    cached.start();
    await sleep(2000);

    const tokens = join(dirname(token.env.SOFTHSM2_CONF), 'tokens');
    const [dir] = readdirSync(tokens);
    const away = join(dirname(tokens), 'away');
    renameSync(join(tokens, dir), away);
    const stoppedAt = performance.now();
    cold.start();
    await sleep(OUTAGE_MS);
    const duringCached = cached.total;
    const refusals = [...cold.refusals];
    await cold.stop();
    const coldOk = cold.total;

    renameSync(away, join(tokens, dir));
    const back = performance.now();
    const outage = back - stoppedAt;
    // Every cold tenant read on each instance directly, until all answer 200.
    const recoveredAfter = await Promise.all(
      apps.map(async (app) => {
        for (;;) {
          const answers = await Promise.all(COLD.map(async (t) => (await read(app.url, t)).status));
          if (answers.every((s) => s === 200)) return performance.now() - back;
          if (performance.now() - back > 30_000) return Infinity;
          await sleep(100);
        }
      }),
    );
    await sleep(2000);
    await cached.stop();
    const ms = refusals.map((r) => r.ms);
    const served = cached.answered.slice(0, duringCached);
    const codes = new Map<string, number>();
    for (const r of refusals) codes.set(`${r.status} ${r.code}`, (codes.get(`${r.status} ${r.code}`) ?? 0) + 1);
    const fig = (v: number) => v.toFixed(0);
    console.log(
      `key store (SoftHSM2 token) away for ${(outage / 1000).toFixed(1)} s under load: cached tenants ${cached.total} calls (${duringCached} by the token's return), ${cached.failures.length} failed ${JSON.stringify(cached.summary())}, ` +
        `answer time median ${fig(quantile(served, 0.5))} ms, p99 ${fig(quantile(served, 0.99))} ms, max ${fig(quantile(served, 1))} ms; ` +
        `other tenants ${refusals.length} refused ${JSON.stringify(Object.fromEntries(codes))}, answer time median ${fig(quantile(ms, 0.5))} ms, p99 ${fig(quantile(ms, 0.99))} ms, ` +
        `max ${fig(quantile(ms, 1))} ms, ${ms.filter((m) => m >= 1200).length} at 1.2 s or more; ${coldOk} answered 200 (none expected); ` +
        `every tenant served again on instance 0 after ${fig(recoveredAfter[0])} ms, instance 1 after ${fig(recoveredAfter[1])} ms (machine load ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')})`,
    );
    expect(cached.failures).toEqual([]);
    expect(cached.counts.renewals).toBeGreaterThan(20);
    expect(refusals.length).toBeGreaterThan(20);
    expect([...codes.keys()]).toEqual(['503 key_store_unavailable']);
    expect(coldOk).toBe(0);
    // The store fails fast here, so a refusal costs what any call costs: on a machine shared with other suites the
    // slowest of hundreds can meet a stall the cached tenants' calls meet too (both printed above). 99 in 100 within
    // 1.2 s, and none slower than the slowest call that needed no key store at all plus the store's 1 s timeout.
    expect(quantile(ms, 0.99)).toBeLessThan(1200);
    expect(quantile(ms, 1)).toBeLessThan(quantile(served, 1) + 1000);
    expect(recoveredAfter.every((t) => t < 5000)).toBe(true);
    // Readiness stays 200 on both instances (the store never took them out of the balancer) and names the store
    // available again on each. A probe keeps a session that works (Pkcs11KeyStore.health); one that meets the token
    // busy (SoftHSM2's files shared by two processes) names it unavailable until the module is initialized again, at
    // most a second later: printed over 2 s, and each instance must name it available in most of them.
    const states: string[][] = [[], []];
    for (let n = 0; n < 10; n++) {
      const ready = await Promise.all(
        apps.map(async (a) => {
          const res = await fetch(`${a.url}/health/ready`);
          return { status: res.status, text: await res.text() };
        }),
      );
      ready.forEach((r, i) =>
        states[i].push(r.status === 200 ? (/"state":"([a-z]+)"/.exec(r.text)?.[1] ?? r.text.slice(0, 200)) : `HTTP ${r.status}`),
      );
      expect(ready.map((r) => r.text).join('')).not.toContain(token.pin);
      await sleep(200);
    }
    console.log(`readiness's key store state after its return, every 200 ms: ${JSON.stringify(states)}`);
    expect(states.flat().filter((x) => x.startsWith('HTTP'))).toEqual([]);
    expect(states.map((s) => s.filter((x) => x === 'available').length >= 8)).toEqual([true, true]);
  }, 150_000);
});
