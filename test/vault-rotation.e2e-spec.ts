import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { accessTokenRef, refreshTokenRef } from '../src/connections/connection-tokens.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { newTenant } from './support/connect.js';
import { seedConnections, type SeededConnection } from './support/seed-connections.js';
import { sandboxEnv, startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';

// The real CLI runs under `npx tsx` (a few seconds each): more than jest's default timeout.
jest.setTimeout(60_000);

const OLD = testVaultKey('old');
const NEW = testVaultKey('new');
const USERS = ['alice', 'bob', 'carol', 'dave'];
/** Short beats for a short test; an instance unseen for three (750 ms) is gone, which a starved CI box still meets. */
const HEARTBEAT_MS = 250;
const CONNECTIONS = 6;

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** `npm run cli -- vault:reencrypt` as an operator runs it (the real CLI), with only the environment it needs. */
function reencryptCli(databaseUrl: string, vaultKeys: string): Promise<{ code: number | null; out: string }> {
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    NODE_ENV: 'test',
    SANDBOX: 'off',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-rotation-cli-')),
    DATABASE_URL: databaseUrl,
    VAULT_KEYS: vaultKeys,
    OPERATOR_API_KEY: `cwsop_test_${randomBytes(24).toString('base64url')}`,
  };
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'src/cli.ts', 'vault:reencrypt'], { cwd: ROOT, env });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Light load over the instances that are up, as a load balancer would spread it: facade calls (`GET /me`),
 * forced renewals (each seals a new pair) and readiness probes. Anything but a 200 is a failed call.
 */
class RollLoad {
  readonly failures: string[] = [];
  readonly counts = { facade: 0, renewals: 0, probes: 0 };
  up: TestApp[] = [];
  private readonly inflight = new Map<TestApp, number>();
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(private readonly connections: SeededConnection[]) {}

  start(workers = 3): void {
    this.running = true;
    this.loops = Array.from({ length: workers }, (_, w) => this.loop(w));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Takes `t` out of the rotation and waits for its calls in flight, as a balancer does before a drain ends. */
  async retire(t: TestApp): Promise<void> {
    this.up = this.up.filter((u) => u !== t);
    while ((this.inflight.get(t) ?? 0) > 0) await sleep(5);
  }

  private async loop(worker: number): Promise<void> {
    for (let n = worker; this.running; n += 3) {
      const targets = this.up;
      if (targets.length === 0) {
        await sleep(10);
        continue;
      }
      const t = targets[n % targets.length];
      const c = this.connections[n % this.connections.length];
      const kind = n % 3;
      this.inflight.set(t, (this.inflight.get(t) ?? 0) + 1);
      try {
        const res =
          kind === 0
            ? await t.request('GET', '/v1/tenants/acme/me', { headers: { 'x-user-id': c.userId } })
            : kind === 1
              ? await t.request('POST', `/v1/tenants/acme/connections/${c.id}/refresh`)
              : await t.request('GET', '/health/ready', { key: null });
        if (res.status !== 200) this.failures.push(`${['facade', 'renewal', 'ready'][kind]}: ${res.status} ${res.text.slice(0, 160)}`);
        else this.counts[(['facade', 'renewals', 'probes'] as const)[kind]]++;
      } catch (e) {
        this.failures.push(`${['facade', 'renewal', 'ready'][kind]}: ${(e as Error).message}`);
      } finally {
        this.inflight.set(t, (this.inflight.get(t) ?? 1) - 1);
      }
      await sleep(15);
    }
  }
}

/**
 * Issue 44, "Rotation across a rolling restart": two instances on one database, under load, rolled one at a
 * time to a ring with a new key first. While an instance without the new key lives, nothing is sealed with it;
 * once the last one is restarted, sealing moves to the new key. No call fails over the whole roll.
 */
describe('vault key rotation across a rolling restart', () => {
  let sandbox: SandboxServer;
  let databaseUrl: string;
  let a: TestApp;
  let b: TestApp;
  let db: pg.Pool;
  let connections: SeededConnection[];
  let load: RollLoad | undefined;

  const start = (vaultKeys: string) =>
    startTestApp({
      databaseUrl,
      sandbox: false,
      env: {
        VAULT_KEYS: vaultKeys,
        VAULT_HEARTBEAT_MS: String(HEARTBEAT_MS),
        REFRESH_SCHEDULER: 'off',
        LOG_LEVEL: 'info',
        ...sandboxEnv(sandbox),
      },
    });
  /** The key ids of a connection's sealed columns, after a forced renewal through `t` (which seals a new pair). */
  const sealedNowBy = async (t: TestApp, c: SeededConnection): Promise<string[]> => {
    const res = await t.request('POST', `/v1/tenants/acme/connections/${c.id}/refresh`);
    expect(res.status).toBe(200);
    const row = await db.query<{ a: string; r: string }>(
      `SELECT split_part(access_token_enc, '.', 2) AS a, split_part(refresh_token_enc, '.', 2) AS r FROM connections WHERE id = $1`,
      [c.id],
    );
    return [row.rows[0].a, row.rows[0].r];
  };
  /** Forces renewals through `t` until a fresh pair is sealed under `kid` (a heartbeat or a few away), or 5 s pass. */
  const sealsEventually = async (t: TestApp, c: SeededConnection, kid: string): Promise<string[]> => {
    const deadline = Date.now() + 5000;
    let kids = await sealedNowBy(t, c);
    while (kids.join() !== `${kid},${kid}` && Date.now() < deadline) {
      await sleep(50);
      kids = await sealedNowBy(t, c);
    }
    return kids;
  };
  const kidsInUse = async () =>
    (
      await db.query<{ kid: string }>(
        `SELECT DISTINCT split_part(v, '.', 2) AS kid FROM (SELECT access_token_enc AS v FROM connections UNION ALL SELECT refresh_token_enc FROM connections) s ORDER BY 1`,
      )
    ).rows.map((r) => r.kid);

  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    // This file is about the VAULT_KEYS ring: an instance of release 0.2.0 holding both keys stays live throughout
    // (its heartbeat is in the future), so every value stays in the ring's format, which that release reads. The
    // tenant data keys' format across a rolling upgrade: tenant-keys.e2e-spec.ts.
    await db.query(
      `INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ('release-0.2.0', ARRAY['old', 'new'], now() + interval '1 day')`,
    );
    a = await start(OLD);
    b = await start(OLD);
    await newTenant(a, 'acme');
    connections = await seedConnections(
      db,
      OLD,
      Array.from({ length: CONNECTIONS }, (_, i) => ({
        tenantId: 'acme',
        userId: `u-${i}`,
        upstreamUserId: USERS[i % USERS.length],
        tokens: sandbox.issueTokens(USERS[i % USERS.length]),
      })),
    );
  });

  afterAll(async () => {
    await load?.stop();
    await b?.close();
    await a?.close();
    await db?.end();
    await sandbox?.close();
  });

  it('seals with the old key while an instance without the new one lives, then with the new key; no call fails', async () => {
    load = new RollLoad(connections);
    load.up = [a, b];
    load.start();
    await sleep(500);

    // Instance A restarts with the new key first; B still holds only the old one.
    await load.retire(a);
    await a.close();
    a = await start(`${NEW},${OLD}`);
    load.up = [a, b];
    const before = { ...load.counts };
    await sleep(1500);
    // Several heartbeats later, A still seals with the old key: B could not open anything else.
    expect(await sealedNowBy(a, connections[0])).toEqual(['old', 'old']);
    expect(await kidsInUse()).toEqual(['old']);
    expect(load.counts.renewals).toBeGreaterThan(before.renewals);
    expect((await b.request('GET', '/health/ready', { key: null })).status).toBe(200);
    const registered = await db.query<{ key_ids: string[] }>(
      `SELECT array_remove(key_ids, 'format:envelope-v2') AS key_ids FROM vault_instances WHERE instance_id <> 'release-0.2.0' ORDER BY array_length(key_ids, 1)`,
    );
    expect(registered.rows.map((r) => r.key_ids)).toEqual([['old'], ['new', 'old']]);

    // Re-encryption to the new key is refused while B cannot open it, naming B.
    const early = await reencryptCli(databaseUrl, `${NEW},${OLD}`);
    expect(early.code).toBe(1);
    expect(early.out).toContain(b.config.instanceId);
    expect(await kidsInUse()).toEqual(['old']);

    // B restarts with the new ring: the last instance without the new key is gone.
    await load.retire(b);
    await b.close();
    b = await start(`${NEW},${OLD}`);
    load.up = [a, b];
    // A moves at its next heartbeat; B started knowing every live instance holds the new key.
    expect(await sealsEventually(a, connections[1], 'new')).toEqual(['new', 'new']);
    expect(await sealedNowBy(b, connections[2])).toEqual(['new', 'new']);
    await sleep(500);
    await load.stop();

    console.log(
      `rotation across a rolling restart: ${JSON.stringify(load.counts)}, ${load.failures.length} failed ${JSON.stringify(load.failures.slice(0, 5))}`,
    );
    expect(load.failures).toEqual([]);
    expect(load.counts.facade).toBeGreaterThan(10);
    expect(load.counts.renewals).toBeGreaterThan(10);
    // One row per live instance: the stopped ones removed theirs.
    expect((await db.query(`SELECT 1 FROM vault_instances WHERE instance_id <> 'release-0.2.0'`)).rowCount).toBe(2);
    // The operator's last step: every value moves to the new key, and still opens on both instances.
    const done = await reencryptCli(databaseUrl, `${NEW},${OLD}`);
    expect(done.code).toBe(0);
    expect(await kidsInUse()).toEqual(['new']);
    for (const c of connections)
      expect((await a.request('GET', '/v1/tenants/acme/me', { headers: { 'x-user-id': c.userId } })).status).toBe(200);
    // Nothing was marked: every value opened on every instance that met it.
    expect((await db.query(`SELECT 1 FROM connections WHERE status <> 'active'`)).rowCount).toBe(0);
    expect((await a.request('GET', '/metrics', { key: null })).text).not.toMatch(/^cws_vault_open_failures_total\{[^}]*\} [1-9]/m);
  }, 60_000);

  it('an instance that stops beating no longer holds sealing back; one that appears without the key does', async () => {
    // Runs after the roll: both instances hold new and old, and seal with new.
    expect(await sealedNowBy(a, connections[3])).toEqual(['new', 'new']);
    // An instance of the old ring appears and beats: sealing goes back to the old key.
    await db.query(`INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ('ghost', ARRAY['old'], now())`);
    const ghostBeat = setInterval(() => void db.query(`UPDATE vault_instances SET last_seen = now() WHERE instance_id = 'ghost'`), 50);
    try {
      expect(await sealsEventually(a, connections[3], 'old')).toEqual(['old', 'old']);
      expect(await sealsEventually(b, connections[4], 'old')).toEqual(['old', 'old']);
    } finally {
      clearInterval(ghostBeat);
    }
    // It dies without a word: its row is ignored after three heartbeats, then deleted.
    expect(await sealsEventually(a, connections[3], 'new')).toEqual(['new', 'new']);
    await sleep(2 * HEARTBEAT_MS);
    expect((await db.query(`SELECT 1 FROM vault_instances WHERE instance_id = 'ghost'`)).rowCount).toBe(0);
  });

  it('a value under a key other instances hold but this one lacks answers 503 and marks nothing', async () => {
    const NEWEST = testVaultKey('newest');
    const c = connections[5];
    // Another instance's ring is ahead: it recorded its key, and sealed this connection's tokens with it.
    await db.query(`INSERT INTO vault_key_checks (kid) VALUES ('newest')`);
    const ahead = new TokenVault({ vaultKeys: parseVaultKeys(NEWEST) });
    await db.query(`UPDATE connections SET access_token_enc = $2, refresh_token_enc = $3, version = version + 1 WHERE id = $1`, [
      c.id,
      await ahead.seal('at_ahead', accessTokenRef({ id: c.id, tenantId: 'acme' })),
      await ahead.seal('rt_ahead', refreshTokenRef({ id: c.id, tenantId: 'acme' })),
    ]);
    // Two heartbeats: each instance has read the key store since.
    await sleep(2 * HEARTBEAT_MS + 100);
    const res = await a.request<{ error: { code: string } }>('GET', '/v1/tenants/acme/me', { headers: { 'x-user-id': c.userId } });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('service_unavailable');
    const row = await db.query<{ status: string }>(`SELECT status FROM connections WHERE id = $1`, [c.id]);
    expect(row.rows[0].status).toBe('active');
    expect((await a.request('GET', '/health/ready', { key: null })).status).toBe(200);
  });
});
