import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import type pg from 'pg';
import type { TransitConfig } from '../src/config/keys-config.js';
import { ConfigError } from '../src/config/config-error.js';
import { KeyStoreUnavailable } from '../src/vault/key-store.js';
import { VaultError } from '../src/vault/token-vault.service.js';
import { TransitKeyStore } from '../src/vault/transit-key-store.js';
import { newTenantAt } from './support/connect.js';
import { seedConnections, type SeededConnection } from './support/seed-connections.js';
import { ROOT, spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase, openPool } from './support/test-database.js';
import { TransitEmulator } from './support/transit-emulator.js';

jest.setTimeout(120_000);

const VAULT_KEYS = testVaultKey('k1');
const OPERATOR_KEY = `cwsop_test_${randomBytes(24).toString('base64url')}`;
const TOKEN = `hvs.${randomBytes(18).toString('base64url')}`;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const configErrorOf = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected the store not to open');
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as ConfigError).message;
    },
  );

/**
 * KEY_STORE=transit against an emulator of the Transit secrets engine's HTTP API (test/support/transit-emulator.ts):
 * no Vault or OpenBao server can run on the project's CI machines. The store alone (what stops a start, key version
 * rotation, a retired version, a store that hangs), then the service: data keys wrapped by Transit and read back
 * after a restart, `503 key_store_unavailable` with the emulator down, recovery when it is back, and
 * `keys set-kek` through the real CLI.
 */
describe('KEY_STORE=transit against a Transit emulator', () => {
  let transit: TransitEmulator;
  const settings = (extra: Partial<TransitConfig> = {}): TransitConfig => ({
    addr: transit.url,
    token: TOKEN,
    mount: 'transit',
    keyName: 'cws-kek',
    namespace: null,
    caFile: null,
    ...extra,
  });
  const operator = (method: string, path: string, body?: unknown) =>
    fetch(`${transit.url}/v1/transit/${path}`, {
      method,
      headers: { 'x-vault-token': TOKEN },
      body: body ? JSON.stringify(body) : undefined,
    });

  beforeAll(async () => {
    transit = await TransitEmulator.start({ token: TOKEN });
    transit.createKey('cws-kek');
    transit.createKey('tenant-acme');
  });

  afterAll(async () => {
    await transit?.stop();
  });

  describe('the store', () => {
    it('a wrong token, a missing key or mount, no server or no CA file stops the start with one line naming it, never the token', async () => {
      const wrongToken = await configErrorOf(TransitKeyStore.open(settings({ token: 'hvs.wrong-token-value' })));
      expect(wrongToken).toMatch(/^TRANSIT_TOKEN: was refused by .* \(403 permission denied\)/);
      expect(wrongToken).not.toContain('hvs.wrong-token-value');
      expect(await configErrorOf(TransitKeyStore.open(settings({ keyName: 'no-such-key' })))).toMatch(
        /^TRANSIT_KEY_NAME: expected a Transit key at .*\/v1\/transit\/keys\/no-such-key, found none \(404\)$/,
      );
      expect(await configErrorOf(TransitKeyStore.open(settings({ mount: 'kms' })))).toMatch(
        /^TRANSIT_KEY_NAME: .*\/v1\/kms\/keys\/cws-kek/,
      );
      const down = await TransitEmulator.start({ token: TOKEN });
      const address = down.url;
      await down.stop();
      expect(await configErrorOf(TransitKeyStore.open(settings({ addr: address })))).toMatch(
        /^TRANSIT_ADDR: no Vault \/ OpenBao server answered at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)$/,
      );
      expect(await configErrorOf(TransitKeyStore.open(settings({ caFile: join(tmpdir(), 'no-such-ca.pem') })))).toMatch(
        /^TRANSIT_CA_FILE: could not be read \(ENOENT\)/,
      );
    });

    it('sends TRANSIT_NAMESPACE as X-Vault-Namespace', async () => {
      const namespaced = await TransitEmulator.start({ token: TOKEN, namespace: 'team-a' });
      namespaced.createKey('cws-kek');
      try {
        const base = { ...settings(), addr: namespaced.url };
        expect(await configErrorOf(TransitKeyStore.open(base))).toMatch(/^TRANSIT_KEY_NAME:/);
        const store = await TransitKeyStore.open({ ...base, namespace: 'team-a' });
        const key = randomBytes(32);
        const wrapped = await store.wrap(key, { tenantId: 'acme', version: 1 });
        expect((await store.unwrap(wrapped, { tenantId: 'acme', version: 1 })).equals(key)).toBe(true);
      } finally {
        await namespaced.stop();
      }
    });

    it('trusts the CAs of TRANSIT_CA_FILE for an https TRANSIT_ADDR', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'cws-transit-tls-'));
      const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
          '-addext',
          'subjectAltName=IP:127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      const secure = await TransitEmulator.start({
        token: TOKEN,
        tls: { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') },
      });
      secure.createKey('cws-kek');
      try {
        expect(secure.url.startsWith('https://')).toBe(true);
        expect(await configErrorOf(TransitKeyStore.open(settings({ addr: secure.url })))).toMatch(
          /^TRANSIT_ADDR: no Vault \/ OpenBao server answered at https:.*SELF_SIGNED/,
        );
        const store = await TransitKeyStore.open(settings({ addr: secure.url, caFile: cert }));
        const dataKey = randomBytes(32);
        const wrapped = await store.wrap(dataKey, { tenantId: 'acme', version: 1 });
        expect((await store.unwrap(wrapped, { tenantId: 'acme', version: 1 })).equals(dataKey)).toBe(true);
      } finally {
        await secure.stop();
      }
    });

    it("follows the key's versions: rotated in Transit, new keys name the new version; below min_decryption_version, a key no longer unwraps", async () => {
      transit.createKey('versioned');
      const store = await TransitKeyStore.open(settings({ keyName: 'versioned' }));
      const key = randomBytes(32);
      const before = await store.wrap(key, { tenantId: 'acme', version: 1 });
      expect(before.kekId).toBe('transit:versioned:v1');
      expect(before.wrapped.startsWith('vault:v1:')).toBe(true);
      expect((await operator('POST', 'keys/versioned/rotate')).status).toBe(200);
      expect(await store.health()).toBe('available');
      expect(store.describe().kekId).toBe('transit:versioned:v2');
      const after = await store.wrap(key, { tenantId: 'acme', version: 1 });
      expect(after.kekId).toBe('transit:versioned:v2');
      expect((await store.unwrap(before, { tenantId: 'acme', version: 1 })).equals(key)).toBe(true);
      // Transit's rewrap takes no associated data: it cannot move a bound key (the store decrypts and encrypts).
      const rewrap = await operator('POST', 'rewrap/versioned', { ciphertext: before.wrapped });
      expect(rewrap.status).toBe(400);
      expect((await operator('POST', 'keys/versioned/config', { min_decryption_version: 2 })).status).toBe(200);
      await expect(store.unwrap(before, { tenantId: 'acme', version: 1 })).rejects.toThrow(VaultError);
      await expect(store.unwrap(before, { tenantId: 'acme', version: 1 })).rejects.toThrow(/disallowed by policy/);
      expect((await store.unwrap(after, { tenantId: 'acme', version: 1 })).equals(key)).toBe(true);
    });

    it('a server that hangs, or is gone, is a store that cannot be reached (never a value problem)', async () => {
      const own = await TransitEmulator.start({ token: TOKEN });
      own.createKey('cws-kek');
      const store = await TransitKeyStore.open({ ...settings(), addr: own.url });
      const wrapped = await store.wrap(randomBytes(32), { tenantId: 'acme', version: 1 });
      own.stall();
      await expect(store.unwrap(wrapped, { tenantId: 'acme', version: 1 })).rejects.toThrow(KeyStoreUnavailable);
      expect(await store.health()).toBe('unavailable');
      await own.stop();
      const refused = store.unwrap(wrapped, { tenantId: 'acme', version: 1 });
      await expect(refused).rejects.toThrow(KeyStoreUnavailable);
      await expect(refused).rejects.not.toThrow(new RegExp(TOKEN.replace('.', '\\.')));
      await own.start();
      expect(await store.health()).toBe('available');
      expect((await store.unwrap(wrapped, { tenantId: 'acme', version: 1 })).length).toBe(32);
      await own.stop();
    });
  });

  describe('the service', () => {
    let sandbox: SandboxServer;
    let databaseUrl: string;
    let db: pg.Pool;
    let app: SpawnedApp | null = null;
    let connection: SeededConnection;

    const env = (extra: Record<string, string> = {}) =>
      spawnedEnv('transit', databaseUrl, sandbox, OPERATOR_KEY, {
        VAULT_KEYS,
        VAULT_HEARTBEAT_MS: '250',
        REFRESH_SCHEDULER: 'off',
        KEY_CACHE_TTL: '1s',
        KEY_CACHE_GRACE: '1s',
        KEY_STORE: 'transit',
        TRANSIT_ADDR: transit.url,
        TRANSIT_TOKEN: TOKEN,
        TRANSIT_KEY_NAME: 'cws-kek',
        ...extra,
      });
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${app?.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${OPERATOR_KEY}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null };
    };
    const rotateSecret = () => call('POST', '/v1/tenants/acme/events-secret', { overlapSeconds: 60 });
    const cli = (args: string[]): Promise<{ code: number | null; out: string; err: string }> => {
      const cliEnv = {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        NODE_ENV: 'test',
        ...env(),
        DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-transit-cli-')),
      };
      return new Promise((resolve, reject) => {
        const child = spawn('npx', ['tsx', 'src/cli.ts', ...args], { cwd: ROOT, env: cliEnv });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
        child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, out, err: err.replace(/^npm warn.*\n/gm, '') }));
      });
    };

    beforeAll(async () => {
      sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
      databaseUrl = await createTestDatabase();
      db = openPool(databaseUrl);
    });

    afterAll(async () => {
      await app?.stop('SIGTERM');
      await db?.end();
      await sandbox?.close();
    });

    it('a refused token stops the start with one line naming TRANSIT_TOKEN, never the token', async () => {
      const failed = await spawnApp(env({ TRANSIT_TOKEN: 'hvs.not-the-token' }), { readyTimeoutMs: 60_000 }).then(
        () => null,
        (e: unknown) => (e as Error).message,
      );
      expect(failed).toContain('TRANSIT_TOKEN: was refused by');
      expect(failed).not.toContain('hvs.not-the-token');
    });

    it('wraps each data key with Transit, and reads everything back after a restart', async () => {
      app = await spawnApp(env(), { readyTimeoutMs: 60_000 });
      await newTenantAt(app.url, OPERATOR_KEY, 'acme');
      [connection] = await seedConnections(db, VAULT_KEYS, [
        { tenantId: 'acme', userId: 'u-1', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
      ]);
      expect((await call('POST', `/v1/tenants/acme/connections/${connection.id}/refresh`)).status).toBe(200);
      const key = await db.query<{ kek_id: string; wrapped_key: string }>(
        `SELECT kek_id, wrapped_key FROM tenant_keys WHERE tenant_id = 'acme'`,
      );
      expect(key.rows).toHaveLength(1);
      expect(key.rows[0].kek_id).toBe('transit:cws-kek:v1');
      expect(key.rows[0].wrapped_key.startsWith('vault:v1:')).toBe(true);
      const ready = await call('GET', '/health/ready');
      expect((ready.body?.info as Record<string, unknown>).keyStore).toEqual({
        status: 'up',
        store: 'transit',
        kekId: 'transit:cws-kek:v1',
        state: 'available',
      });
      expect(ready.text).not.toContain(TOKEN);

      expect(await app.stop('SIGTERM')).toBe(0);
      app = await spawnApp(env(), { readyTimeoutMs: 60_000 });
      expect((await call('GET', '/v1/tenants/acme/me', undefined, { 'x-user-id': 'u-1' })).status).toBe(200);
      expect((await rotateSecret()).status).toBe(201);
      expect(transit.requests.some((r) => r.path === '/v1/transit/decrypt/cws-kek')).toBe(true);
    });

    it('with Transit down, once KEY_CACHE_TTL and KEY_CACHE_GRACE have passed: 503 key_store_unavailable, still ready; back up, it serves again', async () => {
      await transit.stop();
      await sleep(2500);
      const deadline = Date.now() + 10_000;
      let res = await rotateSecret();
      while (res.status === 201 && Date.now() < deadline) {
        await sleep(250);
        res = await rotateSecret();
      }
      expect(res.status).toBe(503);
      expect((res.body?.error as Record<string, unknown>).code).toBe('key_store_unavailable');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      const ready = await call('GET', '/health/ready');
      expect(ready.status).toBe(200);
      expect(((ready.body?.info as Record<string, unknown>).keyStore as Record<string, unknown>).state).toBe('unavailable');

      await transit.start();
      const until = Date.now() + 10_000;
      res = await rotateSecret();
      while (res.status !== 201 && Date.now() < until) {
        await sleep(250);
        res = await rotateSecret();
      }
      expect(res.status).toBe(201);
      expect(((await call('GET', '/health/ready')).body?.info as Record<string, Record<string, unknown>>).keyStore.state).toBe('available');
      expect(app?.output.join('')).not.toContain(TOKEN);
    });

    it('keys set-kek gives the tenant a Transit key of its own; the running service reads through it', async () => {
      const refused = await cli(['keys', 'set-kek', '--tenant', 'acme', '--kek', 'no-such-key']);
      expect(refused.code).toBe(1);
      expect(refused.err).toContain('there is no Transit key "no-such-key"');
      const set = await cli(['keys', 'set-kek', '--tenant', 'acme', '--kek', 'tenant-acme']);
      expect(set.err).toBe('');
      expect(set.code).toBe(0);
      expect(set.out).toContain('tenant acme: 1 data key version(s) rewrapped under transit:tenant-acme:v1');
      expect((await db.query<{ kek_id: string }>(`SELECT kek_id FROM tenant_keys WHERE tenant_id = 'acme'`)).rows).toEqual([
        { kek_id: 'transit:tenant-acme:v1' },
      ]);
      await sleep(1500);
      expect((await rotateSecret()).status).toBe(201);
      expect(transit.requests.some((r) => r.path === '/v1/transit/decrypt/tenant-acme')).toBe(true);
      const status = await cli(['keys', 'status']);
      expect(status.out).toContain('acme: key version 1, KEK transit:tenant-acme:v1 (its own: tenant-acme)');
      expect(status.out + status.err + set.out).not.toContain(TOKEN);
    });
  });
});
