import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig, parseVaultKeys } from './app-config.js';
import { ConfigError } from './config-error.js';
import { localDataDir, type Host } from './local-data.js';

const key = (kid: string) => `${kid}:${randomBytes(32).toString('base64')}`;
const operator = `cwsop_${randomBytes(24).toString('base64url')}`;
const base = { VAULT_KEYS: key('k1'), OPERATOR_API_KEY: operator };

function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cws-config-spec-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe('loadConfig', () => {
  it('refuses to start in production without VAULT_KEYS', () => {
    const e = configErrorOf(() =>
      loadConfig({ NODE_ENV: 'production', OPERATOR_API_KEY: 'x'.repeat(40), DATABASE_URL: 'postgres://x@127.0.0.1/db' }),
    );
    expect(e.variable).toBe('VAULT_KEYS');
    expect(e.message).toContain('VAULT_KEYS');
  });

  it('refuses to start in production without OPERATOR_API_KEY', () => {
    const e = configErrorOf(() => loadConfig({ NODE_ENV: 'production', VAULT_KEYS: key('k1'), DATABASE_URL: 'postgres://x@127.0.0.1/db' }));
    expect(e.variable).toBe('OPERATOR_API_KEY');
  });

  it('refuses to start in production without DATABASE_URL: the embedded database is named, never assumed', () => {
    const prod = { NODE_ENV: 'production', VAULT_KEYS: key('k1'), OPERATOR_API_KEY: operator, DATA_DIR: tempDir() };
    for (const DATABASE_URL of [undefined, '', '  ']) {
      const e = configErrorOf(() => loadConfig({ ...prod, DATABASE_URL }));
      expect([DATABASE_URL, e.variable, e.message]).toEqual([
        DATABASE_URL,
        'DATABASE_URL',
        expect.stringMatching(/^DATABASE_URL: is required/),
      ]);
      expect(e.message).toContain('`embedded`');
      expect(e.message).not.toContain('\n');
    }
    // Named: this instance's own PostgreSQL, as an unset DATABASE_URL gives outside production.
    expect(loadConfig({ ...prod, DATABASE_URL: 'embedded' }).databaseUrl).toBeNull();
    expect(loadConfig({ ...prod, DATABASE_URL: 'postgres://x@127.0.0.1/db' }).databaseUrl).toBe('postgres://x@127.0.0.1/db');
  });

  it('reads DATABASE_URL=embedded as the embedded database outside production too, and names a value that is neither', () => {
    const dir = tempDir();
    expect(loadConfig({ ...base, DATA_DIR: dir, DATABASE_URL: 'embedded' }).databaseUrl).toBeNull();
    expect(loadConfig({ ...base, DATA_DIR: dir }).databaseUrl).toBeNull();
    for (const DATABASE_URL of ['Embedded', 'mysql://x@127.0.0.1/db', 'embedded://x']) {
      const e = configErrorOf(() => loadConfig({ ...base, DATA_DIR: dir, DATABASE_URL }));
      expect([DATABASE_URL, e.variable]).toEqual([DATABASE_URL, 'DATABASE_URL']);
      expect(e.message).not.toContain(DATABASE_URL);
    }
  });

  it('refuses in production an operator key weaker than 128 bits, and says the rule', () => {
    const prod = { NODE_ENV: 'production', VAULT_KEYS: key('k1'), DATABASE_URL: 'postgres://x@127.0.0.1/db' };
    for (const OPERATOR_API_KEY of ['1234567890'.repeat(3) + '12', 'ab'.repeat(20), 'x'.repeat(40)]) {
      const e = configErrorOf(() => loadConfig({ ...prod, OPERATOR_API_KEY }));
      expect([OPERATOR_API_KEY, e.variable, e.message]).toEqual([OPERATOR_API_KEY, 'OPERATOR_API_KEY', expect.stringMatching(/128 bits/)]);
      expect(e.message).not.toContain(OPERATOR_API_KEY);
    }
    for (const OPERATOR_API_KEY of [randomBytes(16).toString('hex'), randomBytes(24).toString('base64url'), operator])
      expect(loadConfig({ ...prod, OPERATOR_API_KEY }).operatorApiKey).toBe(OPERATOR_API_KEY);
    // Outside production only the length rule applies, as before.
    expect(loadConfig({ ...base, OPERATOR_API_KEY: 'x'.repeat(40) }).operatorApiKey).toBe('x'.repeat(40));
  });

  it('reads the security bounds and names a bad entry', () => {
    const c = loadConfig({ ...base, EVENTS_TARGET_ALLOW_PRIVATE: '10.0.0.0/8, fd00::/8 ,hooks.corp.example', SIGN_IN_MAX_FAILURES: '7' });
    expect(c.security).toMatchObject({ eventsTargetAllowPrivate: ['10.0.0.0/8', 'fd00::/8', 'hooks.corp.example'], signInMaxFailures: 7 });
    expect(configErrorOf(() => loadConfig({ ...base, EVENTS_TARGET_ALLOW_PRIVATE: '10.0.0.0/40' })).variable).toBe(
      'EVENTS_TARGET_ALLOW_PRIVATE',
    );
    expect(configErrorOf(() => loadConfig({ ...base, API_KEY_MAX_FAILURES_PER_CLIENT: '0' })).variable).toBe(
      'API_KEY_MAX_FAILURES_PER_CLIENT',
    );
  });

  it('names PORT when it is not a port', () => {
    for (const PORT of ['abc', '70000', '-1', '3.5']) {
      const e = configErrorOf(() => loadConfig({ ...base, PORT }));
      expect(e.variable).toBe('PORT');
      expect(e.message).toMatch(/^PORT: /);
    }
  });

  it('names VAULT_KEYS for a bad entry, without echoing key material', () => {
    const short = randomBytes(16).toString('base64');
    for (const VAULT_KEYS of ['nokid', `bad kid:${randomBytes(32).toString('base64')}`, `k1:${short}`, `${key('a')},${key('a')}`, ' , ']) {
      const e = configErrorOf(() => loadConfig({ ...base, VAULT_KEYS }));
      expect(e.variable).toBe('VAULT_KEYS');
      expect(e.message).not.toContain(short);
    }
  });

  it('names the missing client id of a configured environment', () => {
    const e = configErrorOf(() => loadConfig({ ...base, CWS_NA_AUTH_URL: 'https://auth.example.com' }));
    expect(e.variable).toBe('CWS_NA_CLIENT_ID');
    expect(e.message).toContain('CWS_NA_AUTH_URL');
  });

  it('applies the defaults', () => {
    // SANDBOX=off: the sandbox's generated client secret would otherwise be written under the default DATA_DIR.
    const user: Host = { uid: 1000, cwd: process.cwd(), systemStateDir: '/nonexistent', stdoutIsTty: false };
    expect(loadConfig({ ...base, SANDBOX: 'off' }, user).dataDir).toBe(resolve('.data'));
    const dir = tempDir();
    const c = loadConfig({ ...base, DATA_DIR: dir }, user);
    expect(c).toMatchObject({
      nodeEnv: 'development',
      production: false,
      port: 3000,
      publicUrl: 'http://localhost:3000',
      dataDir: dir,
      databaseUrl: null,
      vaultKeysGenerated: false,
      operatorApiKey: operator,
      operatorKeyGenerated: false,
      logLevel: 'info',
      logFormat: 'json',
      refresh: { at: 0.8 },
      sandbox: { enabled: true, port: 3001 },
    });
    expect(c.vaultKeys.map((k) => k.kid)).toEqual(['k1']);
    // The `sandbox` environment comes from the running sandbox (service.ts), which knows its own client id and scopes.
    expect(Object.keys(c.environments)).toEqual([]);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.vaultKeys[0])).toBe(true);
  });

  it('turns the sandbox off by default in production and when an environment is configured', () => {
    const prod = loadConfig({ ...base, NODE_ENV: 'production', DATABASE_URL: 'postgres://x@127.0.0.1/db' });
    expect(prod.sandbox.enabled).toBe(false);
    const na = loadConfig({
      ...base,
      CWS_NA_AUTH_URL: 'https://auth.example.com/',
      CWS_NA_CLIENT_ID: 'id',
      CWS_NA_CLIENT_SECRET: 'secret',
    });
    expect(na.sandbox.enabled).toBe(false);
    expect(na.environments.na).toMatchObject({
      authUrl: 'https://auth.example.com',
      apiUrl: 'https://auth.example.com',
      tokenAuth: 'body',
      userinfoMethod: 'GET',
      scopes: [],
    });
  });

  it('outside production, generates the local vault and operator keys once and finds them again', () => {
    const dir = tempDir();
    const first = loadConfig({ DATA_DIR: dir });
    expect(first.vaultKeysGenerated).toBe(true);
    expect(first.operatorKeyGenerated).toBe(true);
    expect(first.vaultKeys[0].key).toHaveLength(32);
    expect(statSync(join(dir, 'secrets.json')).mode & 0o777).toBe(0o600);
    const again = loadConfig({ DATA_DIR: dir });
    expect(again.vaultKeys[0].kid).toBe(first.vaultKeys[0].kid);
    expect(again.vaultKeys[0].key.equals(first.vaultKeys[0].key)).toBe(true);
    expect(again.operatorApiKey).toBe(first.operatorApiKey);
  });

  it('logs JSON unless stdout is a terminal, and LOG_FORMAT overrides either way', () => {
    const host = (stdoutIsTty: boolean): Host => ({ uid: 1000, cwd: process.cwd(), systemStateDir: '/nonexistent', stdoutIsTty });
    const env = { ...base, DATA_DIR: tempDir() };
    expect(loadConfig(env, host(false)).logFormat).toBe('json');
    expect(loadConfig(env, host(true)).logFormat).toBe('pretty');
    expect(loadConfig({ ...env, LOG_FORMAT: 'json' }, host(true)).logFormat).toBe('json');
    expect(loadConfig({ ...env, LOG_FORMAT: 'pretty' }, host(false)).logFormat).toBe('pretty');
    const e = configErrorOf(() => loadConfig({ ...env, LOG_FORMAT: 'yaml' }, host(true)));
    expect(e.variable).toBe('LOG_FORMAT');
    expect(e.message).toContain('json, pretty');
  });

  it('reads the key store: local by default, pkcs11 and transit only with their variables, durations for the cache', () => {
    const dir = tempDir();
    const defaults = loadConfig({ ...base, DATA_DIR: dir });
    expect(defaults.keys).toEqual({ store: 'local', pkcs11: null, transit: null, cacheTtlMs: 300_000, cacheGraceMs: 600_000 });
    const pkcs11 = {
      KEY_STORE: 'pkcs11',
      PKCS11_MODULE: '/usr/lib/softhsm/libsofthsm2.so',
      PKCS11_TOKEN_LABEL: 'cws',
      PKCS11_PIN: 'pin-1234-secret',
      PKCS11_KEK_LABEL: 'kek',
    };
    const set = loadConfig({ ...base, DATA_DIR: dir, ...pkcs11, KEY_CACHE_TTL: '30s', KEY_CACHE_GRACE: '1h' });
    expect(set.keys).toEqual({
      store: 'pkcs11',
      pkcs11: { module: pkcs11.PKCS11_MODULE, tokenLabel: 'cws', pin: 'pin-1234-secret', kekLabel: 'kek' },
      transit: null,
      cacheTtlMs: 30_000,
      cacheGraceMs: 3_600_000,
    });
    const transit = {
      KEY_STORE: 'transit',
      TRANSIT_ADDR: 'https://vault.internal:8200/',
      TRANSIT_TOKEN: 'hvs.secret',
      TRANSIT_KEY_NAME: 'cws',
    };
    expect(loadConfig({ ...base, DATA_DIR: dir, ...transit, TRANSIT_MOUNT: '/kms/' }).keys.transit).toEqual({
      addr: 'https://vault.internal:8200',
      token: 'hvs.secret',
      mount: 'kms',
      keyName: 'cws',
      namespace: null,
      caFile: null,
    });
    expect(loadConfig({ ...base, DATA_DIR: dir, ...transit }).keys.transit?.mount).toBe('transit');
    expect(configErrorOf(() => loadConfig({ ...base, DATA_DIR: dir, ...transit, TRANSIT_TOKEN: '' })).message).toBe(
      'TRANSIT_TOKEN: is required when KEY_STORE=transit',
    );
    const missing = configErrorOf(() => loadConfig({ ...base, DATA_DIR: dir, ...pkcs11, PKCS11_PIN: '' }));
    expect(missing.message).toBe('PKCS11_PIN: is required when KEY_STORE=pkcs11');
    expect(configErrorOf(() => loadConfig({ ...base, DATA_DIR: dir, KEY_STORE: 'kms' })).message).toMatch(
      /^KEY_STORE: must be one of local, pkcs11, transit/,
    );
    expect(configErrorOf(() => loadConfig({ ...base, DATA_DIR: dir, KEY_CACHE_TTL: 'soon' })).message).toMatch(
      /^KEY_CACHE_TTL: must be a duration/,
    );
  });

  it('rejects a DATABASE_URL that is not PostgreSQL', () => {
    expect(configErrorOf(() => loadConfig({ ...base, DATABASE_URL: 'mysql://x@y/z' })).variable).toBe('DATABASE_URL');
  });
});

describe('the default DATA_DIR', () => {
  // SANDBOX=off and given keys: nothing is generated, so nothing is written where DATA_DIR points.
  const env = { ...base, SANDBOX: 'off' };
  const host = (uid: number, cwd: string, systemStateDir: string): Host => ({ uid, cwd, systemStateDir, stdoutIsTty: false });

  it('is .data in the working directory when the postgres user can reach it, or when not root', () => {
    const open = tempDir();
    chmodSync(open, 0o755);
    expect(loadConfig(env, host(0, open, '/nonexistent')).dataDir).toBe(join(open, '.data'));
    const closed = tempDir();
    expect(statSync(closed).mode & 0o077).toBe(0);
    expect(loadConfig(env, host(1000, closed, '/nonexistent')).dataDir).toBe(join(closed, '.data'));
  });

  it('as root under a directory only root may enter, is one directory per working directory under the system state directory', () => {
    const closed = tempDir();
    const state = tempDir();
    const a = join(closed, 'cws-connect');
    const b = join(closed, 'elsewhere', 'cws-connect');
    for (const clone of [a, b]) mkdirSync(clone, { recursive: true, mode: 0o755 });
    const dirA = loadConfig(env, host(0, a, state)).dataDir;
    expect(dirA).toMatch(new RegExp(`^${state}/cws-connect-[0-9a-f]{8}$`));
    expect(loadConfig(env, host(0, a, state)).dataDir).toBe(dirA);
    expect(loadConfig(env, host(0, b, state)).dataDir).not.toBe(dirA);
  });

  it('stays in the working directory with DATABASE_URL (no PostgreSQL to run), and DATA_DIR always wins', () => {
    const closed = tempDir();
    const state = tempDir();
    expect(loadConfig({ ...env, DATABASE_URL: 'postgres://x@127.0.0.1/db' }, host(0, closed, state)).dataDir).toBe(join(closed, '.data'));
    expect(loadConfig({ ...env, DATA_DIR: 'here' }, host(0, closed, state)).dataDir).toBe(join(closed, 'here'));
  });

  it('with DATABASE_URL=embedded, is chosen as for an unset DATABASE_URL (PostgreSQL runs as the postgres user)', () => {
    const closed = tempDir();
    const state = tempDir();
    const clone = join(closed, 'cws-connect');
    mkdirSync(clone, { recursive: true, mode: 0o755 });
    const unset = loadConfig(env, host(0, clone, state)).dataDir;
    expect(unset).toMatch(new RegExp(`^${state}/cws-connect-[0-9a-f]{8}$`));
    expect(loadConfig({ ...env, DATABASE_URL: 'embedded' }, host(0, clone, state)).dataDir).toBe(unset);
    expect(localDataDir({ DATABASE_URL: 'embedded' }, host(0, clone, state))).toBe(unset);
    expect(localDataDir({ DATABASE_URL: 'postgres://x@127.0.0.1/db' }, host(0, clone, state))).toBe(join(clone, '.data'));
  });
});

describe('parseVaultKeys', () => {
  it('keeps the order: the first key is the active one', () => {
    expect(parseVaultKeys(`${key('new')}, ${key('old')}`).map((k) => k.kid)).toEqual(['new', 'old']);
  });
});

describe('tracing (OTEL_*)', () => {
  const load = (env: Record<string, string>) => loadConfig({ ...base, DATABASE_URL: 'postgres://x@127.0.0.1/db', SANDBOX: 'off', ...env });

  it('is off without an OTLP endpoint, and with OTEL_SDK_DISABLED', () => {
    expect(load({}).tracing).toBeNull();
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeNull();
  });

  it('sends spans to <endpoint>/v1/traces over protobuf by default, or to the traces endpoint as given', () => {
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'cws-connect',
      sampleRatio: 1,
      scheduleDelayMs: 5000,
    });
    const t = load({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otlp.example/api/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'connect-eu',
    }).tracing;
    expect(t).toMatchObject({ endpoint: 'https://otlp.example/api/traces', protocol: 'http/json', serviceName: 'connect-eu' });
  });

  it('reads export headers (percent-decoded) and a sampling ratio', () => {
    const t = load({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=a%3Db,Team=ops',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.05',
    }).tracing;
    expect(t?.headers).toEqual({ 'x-api-key': 'a=b', team: 'ops' });
    expect(t?.sampleRatio).toBe(0.05);
  });

  it('refuses grpc, a malformed header list without quoting its values, and a ratio out of range', () => {
    expect(configErrorOf(() => load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).variable).toBe(
      'OTEL_EXPORTER_OTLP_PROTOCOL',
    );
    const headers = configErrorOf(() =>
      load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'supersecretvalue' }),
    );
    expect(headers.variable).toBe('OTEL_EXPORTER_OTLP_HEADERS');
    expect(headers.message).not.toContain('supersecretvalue');
    expect(
      configErrorOf(() =>
        load({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: '2',
        }),
      ).variable,
    ).toBe('OTEL_TRACES_SAMPLER_ARG');
    expect(configErrorOf(() => load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).variable).toBe('OTEL_EXPORTER_OTLP_ENDPOINT');
  });
});
