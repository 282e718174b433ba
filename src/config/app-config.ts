import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { SANDBOX_DEFAULTS } from 'cws-sandbox';
import { sha256 } from '../common/hash.js';
import { estimatedBits, readSecurity, type SecurityConfig } from './security-config.js';

export const ENVIRONMENT_NAMES = ['na', 'eu', 'demo', 'sandbox'] as const;
export type EnvironmentName = (typeof ENVIRONMENT_NAMES)[number];

export interface CwsEnvironment {
  name: EnvironmentName;
  /** {base_url} of the authorize and token calls. */
  authUrl: string;
  /** Base address of resource calls; may carry a path prefix. No trailing slash. */
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  tokenAuth: 'body' | 'header';
  userinfoMethod: 'GET' | 'POST';
}

export interface VaultKey {
  kid: string;
  key: Buffer;
}

export interface AppConfig {
  nodeEnv: string;
  production: boolean;
  port: number;
  publicUrl: string;
  dataDir: string;
  /** null: an embedded PostgreSQL under dataDir is started (main.ts fills the URL in before the app boots). */
  databaseUrl: string | null;
  databasePoolSize: number;
  /** The first key is the active one; the others only decrypt. */
  vaultKeys: VaultKey[];
  vaultKeysGenerated: boolean;
  operatorApiKey: string;
  operatorKeyGenerated: boolean;
  environments: Partial<Record<EnvironmentName, CwsEnvironment>>;
  sandbox: { enabled: boolean; port: number; clientId: string; clientSecret: string; accessTokenTtlSeconds: number };
  refresh: {
    at: number;
    intervalMs: number;
    batchSize: number;
    concurrency: number;
    leaseMs: number;
    onDemandMarginMs: number;
    schedulerEnabled: boolean;
  };
  upstream: { connectTimeoutMs: number; headersTimeoutMs: number; bodyTimeoutMs: number; tokenTimeoutMs: number; retries: number };
  /** The HTTP server's timeouts and what one tenant may hold at once on the facade (docs/security.md). */
  http: {
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    idleTimeoutMs: number;
    keepAliveTimeoutMs: number;
    /** A request body with no new byte for this long is cut (408). */
    bodyTimeoutMs: number;
    tenantMaxInFlight: number;
    tenantMaxUploads: number;
  };
  /** The drain on SIGTERM/SIGINT (ops/drain.ts): how long requests are still served while readiness says 503, and the bound on the whole drain. */
  shutdown: { delayMs: number; timeoutMs: number };
  /** Outbound delivery of events to the tenant's eventsTargetUrl (docs/webhooks.md). */
  events: {
    retryBaseMs: number;
    retryMaxMs: number;
    retrySpanMs: number;
    attemptTimeoutMs: number;
    pollIntervalMs: number;
    relayIntervalMs: number;
    batchSize: number;
    jobExpireSeconds: number;
    maintenanceSeconds: number;
    /** Group commits of inbound deliveries written at once (docs/webhooks.md, Inbound). */
    inboundCommitsInFlight: number;
    /** EVENT_RETENTION_DAYS: days events and their attempts are kept, unless the tenant sets its own window. */
    retentionDays: number;
  };
  /** The audit trail (docs/operations.md, "Audit trail"): rows older than this many days are swept away. */
  audit: { retentionDays: number };
  logLevel: string;
  /** pretty: one readable line per entry, for a person at a terminal; json: one JSON object per line. */
  logFormat: 'json' | 'pretty';
  instanceId: string;
  /** OpenTelemetry trace export (docs/operations.md, "Traces"); null: off, no SDK loaded. */
  tracing: TracingConfig | null;
  /** docs/security.md's bounds: events targets, sign-in throttling, metrics access. */
  security: SecurityConfig;
}

export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  endpoint: string;
  protocol: 'http/protobuf' | 'http/json';
  /** OTEL_EXPORTER_OTLP_HEADERS (a collector's credentials, typically): sent with each export, never logged. */
  headers: Record<string, string>;
  serviceName: string;
  /** Fraction of new traces kept; a caller's sampled traceparent is always followed. */
  sampleRatio: number;
  scheduleDelayMs: number;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** What the default DATA_DIR depends on besides the environment. */
export interface Host {
  uid: number | undefined;
  cwd: string;
  /** Where local state goes when the working directory cannot hold it (see defaultDataDir). */
  systemStateDir: string;
  /** The default LOG_FORMAT: pretty for a person at a terminal, JSON for everything else. */
  stdoutIsTty: boolean;
}

const PROCESS_HOST: Host = {
  uid: process.getuid?.(),
  cwd: process.cwd(),
  systemStateDir: '/var/lib/cws-connect',
  stdoutIsTty: process.stdout.isTTY === true,
};

/**
 * Reads and validates every variable once, into one frozen object. Nothing else reads process.env.
 * Outside production, missing local secrets (vault key, operator key, sandbox client) are generated once
 * and kept in $DATA_DIR/secrets.json so that a restart finds the same ones.
 */
export function loadConfig(env: Env, host: Host = PROCESS_HOST): AppConfig {
  const nodeEnv = env.NODE_ENV?.trim() || 'development';
  const production = nodeEnv === 'production';
  const port = int(env, 'PORT', 3000, 0, 65535);
  const publicUrl = stripSlash(url(env, 'PUBLIC_URL') ?? `http://localhost:${port}`);
  const databaseUrl = env.DATABASE_URL?.trim() || null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// connection string');
  }
  const dataDir = localDataDir(env, host);

  const local = production ? null : new LocalSecrets(dataDir);

  let vaultKeys: VaultKey[];
  let vaultKeysGenerated = false;
  if (env.VAULT_KEYS?.trim()) {
    vaultKeys = parseVaultKeys(env.VAULT_KEYS);
  } else if (production || !local) {
    throw new ConfigError('VAULT_KEYS', 'is required when NODE_ENV=production (kid:base64 of 32 bytes, comma separated)');
  } else {
    vaultKeys = parseVaultKeys(
      local.get('vaultKey', () => `local-${randomBytes(4).toString('hex')}:${randomBytes(32).toString('base64')}`),
    );
    vaultKeysGenerated = true;
  }

  let operatorApiKey: string;
  let operatorKeyGenerated = false;
  if (env.OPERATOR_API_KEY?.trim()) {
    operatorApiKey = env.OPERATOR_API_KEY.trim();
    if (operatorApiKey.length < 32) throw new ConfigError('OPERATOR_API_KEY', 'must be at least 32 characters');
    // 128 bits: e.g. 22 random base64url characters, or 32 hex digits.
    if (production && estimatedBits(operatorApiKey) < 128)
      throw new ConfigError('OPERATOR_API_KEY', 'is weaker than 128 bits in production: use `openssl rand -base64 32` or longer');
  } else if (production || !local) {
    throw new ConfigError('OPERATOR_API_KEY', 'is required when NODE_ENV=production');
  } else {
    operatorApiKey = local.get('operatorApiKey', () => `cwsop_${randomBytes(32).toString('base64url')}`);
    operatorKeyGenerated = true;
  }

  const environments: Partial<Record<EnvironmentName, CwsEnvironment>> = {};
  for (const name of ['na', 'eu', 'demo', 'sandbox'] as const) {
    const e = readEnvironment(env, name);
    if (e) environments[name] = e;
  }
  const anyAuthUrl = Object.keys(env).some((k) => /^CWS_[A-Z]+_AUTH_URL$/.test(k) && env[k]?.trim());
  const sandboxEnabled = bool(env, 'SANDBOX', !anyAuthUrl && !production);
  const sandboxPort = int(env, 'SANDBOX_PORT', port === 0 ? 0 : port + 1, 0, 65535);
  const sandboxTtl = int(env, 'SANDBOX_TOKEN_TTL_SECONDS', SANDBOX_DEFAULTS.accessTokenTtlSeconds, 1, 10 * 365 * 86400);
  let sandboxClientId = SANDBOX_DEFAULTS.clientId;
  let sandboxClientSecret = '';
  if (sandboxEnabled) {
    if (environments.sandbox) {
      throw new ConfigError(
        'SANDBOX',
        'is on, so the sandbox environment is configured automatically: unset CWS_SANDBOX_* or set SANDBOX=off',
      );
    }
    if (sandboxPort === 0) throw new ConfigError('SANDBOX_PORT', 'must be a fixed port when SANDBOX=on');
    sandboxClientSecret = local
      ? local.get('sandboxClientSecret', () => randomBytes(24).toString('base64url'))
      : randomBytes(24).toString('base64url');
    const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
    environments.sandbox = {
      name: 'sandbox',
      authUrl: sandboxUrl,
      apiUrl: sandboxUrl,
      clientId: sandboxClientId,
      clientSecret: sandboxClientSecret,
      scopes: [...SANDBOX_DEFAULTS.scopes],
      tokenAuth: 'body',
      userinfoMethod: 'GET',
    };
  } else if (environments.sandbox) {
    sandboxClientId = environments.sandbox.clientId;
  }

  const refreshAt = num(env, 'REFRESH_AT', 0.8, 0.1, 0.95);
  const config: AppConfig = {
    nodeEnv,
    production,
    port,
    publicUrl,
    dataDir,
    databaseUrl,
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 20, 2, 500),
    vaultKeys,
    vaultKeysGenerated,
    operatorApiKey,
    operatorKeyGenerated,
    environments,
    sandbox: {
      enabled: sandboxEnabled,
      port: sandboxPort,
      clientId: sandboxClientId,
      clientSecret: sandboxClientSecret,
      accessTokenTtlSeconds: sandboxTtl,
    },
    refresh: {
      at: refreshAt,
      intervalMs: int(env, 'REFRESH_INTERVAL_MS', 5000, 100, 3_600_000),
      batchSize: int(env, 'REFRESH_BATCH_SIZE', 100, 1, 10_000),
      concurrency: int(env, 'REFRESH_CONCURRENCY', 8, 1, 1000),
      leaseMs: int(env, 'REFRESH_LEASE_MS', 60_000, 1000, 3_600_000),
      onDemandMarginMs: int(env, 'REFRESH_MARGIN_MS', 60_000, 0, 3_600_000),
      schedulerEnabled: bool(env, 'REFRESH_SCHEDULER', true),
    },
    upstream: {
      connectTimeoutMs: int(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 5000, 100, 600_000),
      headersTimeoutMs: int(env, 'UPSTREAM_TIMEOUT_MS', 30_000, 100, 3_600_000),
      bodyTimeoutMs: int(env, 'UPSTREAM_BODY_TIMEOUT_MS', 300_000, 100, 3_600_000),
      tokenTimeoutMs: int(env, 'UPSTREAM_TOKEN_TIMEOUT_MS', 15_000, 100, 600_000),
      retries: int(env, 'UPSTREAM_RETRIES', 2, 0, 10),
    },
    http: {
      headersTimeoutMs: int(env, 'HTTP_HEADERS_TIMEOUT_MS', 15_000, 100, 600_000),
      requestTimeoutMs: int(env, 'HTTP_REQUEST_TIMEOUT_MS', 3_600_000, 1000, 86_400_000),
      idleTimeoutMs: int(env, 'HTTP_IDLE_TIMEOUT_MS', 120_000, 100, 3_600_000),
      keepAliveTimeoutMs: int(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5000, 100, 600_000),
      bodyTimeoutMs: int(env, 'HTTP_BODY_TIMEOUT_MS', 30_000, 100, 600_000),
      // The upstream pool has 256 sockets per origin: one tenant may hold at most a quarter of them by default.
      tenantMaxInFlight: int(env, 'FACADE_TENANT_MAX_IN_FLIGHT', 64, 1, 255),
      tenantMaxUploads: int(env, 'FACADE_TENANT_MAX_UPLOADS', 16, 1, 255),
    },
    shutdown: {
      delayMs: int(env, 'SHUTDOWN_DELAY_MS', 5000, 0, 600_000),
      timeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 25_000, 100, 3_600_000),
    },
    events: {
      retryBaseMs: int(env, 'EVENTS_RETRY_BASE_MS', 10_000, 1, 3_600_000),
      retryMaxMs: int(env, 'EVENTS_RETRY_MAX_MS', 3_600_000, 1, 86_400_000),
      retrySpanMs: int(env, 'EVENTS_RETRY_SPAN_MS', 86_400_000, 0, 30 * 86_400_000),
      attemptTimeoutMs: int(env, 'EVENTS_ATTEMPT_TIMEOUT_MS', 15_000, 100, 600_000),
      pollIntervalMs: int(env, 'EVENTS_POLL_INTERVAL_MS', 1000, 500, 60_000),
      relayIntervalMs: int(env, 'EVENTS_RELAY_INTERVAL_MS', 1000, 20, 60_000),
      batchSize: int(env, 'EVENTS_BATCH_SIZE', 50, 1, 1000),
      jobExpireSeconds: int(env, 'EVENTS_JOB_EXPIRE_SECONDS', 120, 1, 86_400),
      maintenanceSeconds: int(env, 'EVENTS_MAINTENANCE_SECONDS', 60, 1, 3600),
      inboundCommitsInFlight: int(env, 'INBOUND_COMMITS_IN_FLIGHT', 1, 1, 8),
      retentionDays: int(env, 'EVENT_RETENTION_DAYS', 30, 1, 400),
    },
    audit: { retentionDays: int(env, 'AUDIT_RETENTION_DAYS', 400, 1, 3650) },
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    logFormat: oneOf(env, 'LOG_FORMAT', ['json', 'pretty'], host.stdoutIsTty ? 'pretty' : 'json'),
    instanceId: env.INSTANCE_ID?.trim() || `${process.pid}-${randomBytes(3).toString('hex')}`,
    tracing: readTracing(env),
    security: readSecurity(env),
  };
  if (config.upstream.tokenTimeoutMs * 2 >= config.refresh.leaseMs) {
    throw new ConfigError(
      'REFRESH_LEASE_MS',
      'must be more than twice UPSTREAM_TOKEN_TIMEOUT_MS, so that a renewal lease cannot expire during a token call',
    );
  }
  if (config.http.headersTimeoutMs > config.http.requestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', 'must not be more than HTTP_REQUEST_TIMEOUT_MS');
  }
  if (config.http.idleTimeoutMs <= config.upstream.headersTimeoutMs) {
    throw new ConfigError(
      'HTTP_IDLE_TIMEOUT_MS',
      'must be more than UPSTREAM_TIMEOUT_MS, so that a caller waiting for a slow upstream answer is not cut off first',
    );
  }
  if (config.http.tenantMaxUploads > config.http.tenantMaxInFlight) {
    throw new ConfigError(
      'FACADE_TENANT_MAX_UPLOADS',
      'must not be more than FACADE_TENANT_MAX_IN_FLIGHT (an upload is also a call in flight)',
    );
  }
  return deepFreeze(config);
}

/** DATA_DIR as the service resolves it: the variable, or the default below. Also read by the demo partner app. */
export function localDataDir(env: Env, host: Host = PROCESS_HOST): string {
  const explicit = env.DATA_DIR?.trim();
  return explicit ? resolve(host.cwd, explicit) : defaultDataDir(host, !env.DATABASE_URL?.trim());
}

/**
 * `.data` in the working directory, except as root with the embedded PostgreSQL when the working directory
 * lies under one that only root may enter (a clone in /root, or under any 0700 directory): PostgreSQL then
 * runs as the postgres user, which could reach neither the cluster nor the binaries npm installed there.
 * Local state then goes to <systemStateDir>/<directory name>-<hash of its path> (/var/lib/cws-connect/…):
 * the system's place for a service's state, reachable by that user, kept across reboots (unlike /tmp), one
 * per working directory. The start-up banner names the directory either way; deleting it starts afresh.
 */
export function defaultDataDir(host: Host, embeddedDatabase: boolean): string {
  if (host.uid !== 0 || !embeddedDatabase || othersMayEnter(host.cwd)) return resolve(host.cwd, '.data');
  const id = sha256(resolve(host.cwd)).toString('hex').slice(0, 8);
  return join(host.systemStateDir, `${basename(resolve(host.cwd))}-${id}`);
}

function othersMayEnter(dir: string): boolean {
  for (let d = resolve(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

/** The standard OpenTelemetry variables this service honours; tracing is on when an OTLP endpoint is set. */
function readTracing(env: Env): TracingConfig | null {
  if (bool(env, 'OTEL_SDK_DISABLED', false)) return null;
  const base = url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const traces = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (!base && !traces) return null;
  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  if (env[protocolVar]?.trim().toLowerCase() === 'grpc')
    throw new ConfigError(protocolVar, 'grpc is not supported: use http/protobuf (the default) or http/json');
  const sampler = oneOf(env, 'OTEL_TRACES_SAMPLER', ['parentbased_traceidratio', 'parentbased_always_on'], 'parentbased_always_on');
  return {
    endpoint: traces ?? `${stripSlash(base as string)}/v1/traces`,
    protocol: oneOf(env, protocolVar, ['http/protobuf', 'http/json'], 'http/protobuf'),
    headers: env.OTEL_EXPORTER_OTLP_TRACES_HEADERS?.trim()
      ? otlpHeaders('OTEL_EXPORTER_OTLP_TRACES_HEADERS', env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)
      : otlpHeaders('OTEL_EXPORTER_OTLP_HEADERS', env.OTEL_EXPORTER_OTLP_HEADERS),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'cws-connect',
    sampleRatio: sampler === 'parentbased_traceidratio' ? num(env, 'OTEL_TRACES_SAMPLER_ARG', 1, 0, 1) : 1,
    scheduleDelayMs: int(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 10, 600_000),
  };
}

/** `key=value,key2=value2`, values percent-encoded (the OTel specification's format). The values are not quoted in errors. */
function otlpHeaders(variable: string, raw: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    const name = eq > 0 ? pair.slice(0, eq).trim() : '';
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new ConfigError(variable, 'must be a comma-separated list of name=value pairs');
    try {
      headers[name.toLowerCase()] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(variable, `the value of ${name} is not valid percent-encoding`);
    }
  }
  return headers;
}

function readEnvironment(env: Env, name: EnvironmentName): CwsEnvironment | null {
  const p = `CWS_${name.toUpperCase()}_`;
  const authUrl = url(env, `${p}AUTH_URL`);
  if (!authUrl) return null;
  const clientId = env[`${p}CLIENT_ID`]?.trim();
  const clientSecret = env[`${p}CLIENT_SECRET`]?.trim();
  if (!clientId) throw new ConfigError(`${p}CLIENT_ID`, `is required when ${p}AUTH_URL is set`);
  if (!clientSecret) throw new ConfigError(`${p}CLIENT_SECRET`, `is required when ${p}AUTH_URL is set`);
  const scopes = (env[`${p}SCOPES`] ?? '').split(/\s+/).filter(Boolean);
  return {
    name,
    authUrl: stripSlash(authUrl),
    apiUrl: stripSlash(url(env, `${p}API_URL`) ?? authUrl),
    clientId,
    clientSecret,
    scopes,
    tokenAuth: oneOf(env, `${p}TOKEN_AUTH`, ['body', 'header'], 'body'),
    userinfoMethod: oneOf(env, `${p}USERINFO_METHOD`, ['GET', 'POST'], 'GET'),
  };
}

export function parseVaultKeys(raw: string): VaultKey[] {
  const keys = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const i = entry.indexOf(':');
      const kid = i > 0 ? entry.slice(0, i) : '';
      if (!/^[A-Za-z0-9_-]{1,32}$/.test(kid)) {
        throw new ConfigError('VAULT_KEYS', 'each entry must be kid:base64(32 bytes), kid of letters, digits, - or _ (at most 32)');
      }
      const key = Buffer.from(entry.slice(i + 1), 'base64');
      if (key.length !== 32) throw new ConfigError('VAULT_KEYS', `key "${kid}" must decode to exactly 32 bytes`);
      return { kid, key };
    });
  if (keys.length === 0) throw new ConfigError('VAULT_KEYS', 'holds no key');
  if (new Set(keys.map((k) => k.kid)).size !== keys.length) throw new ConfigError('VAULT_KEYS', 'key ids must be unique');
  return keys;
}

class LocalSecrets {
  private readonly file: string;
  private values: Record<string, string> | null = null;

  constructor(private readonly dataDir: string) {
    this.file = join(dataDir, 'secrets.json');
  }

  get(name: string, generate: () => string): string {
    if (!this.values) {
      try {
        this.values = existsSync(this.file) ? (JSON.parse(readFileSync(this.file, 'utf8')) as Record<string, string>) : {};
      } catch (e) {
        throw new ConfigError(
          'DATA_DIR',
          `${this.file} cannot be read (${describeFsError(e)}); fix or remove it, or set DATA_DIR to another directory`,
        );
      }
    }
    const existing = this.values[name];
    if (existing) return existing;
    const created = generate();
    this.values[name] = created;
    try {
      // 0o755: the embedded PostgreSQL runs as its own user and must traverse DATA_DIR; the secrets file itself is 0o600.
      mkdirSync(this.dataDir, { recursive: true, mode: 0o755 });
      writeFileSync(this.file, JSON.stringify(this.values, null, 2) + '\n', { mode: 0o600 });
    } catch (e) {
      throw new ConfigError(
        'DATA_DIR',
        `${this.dataDir} cannot be created or written (${describeFsError(e)}); set DATA_DIR to a directory this user can write`,
      );
    }
    return created;
  }
}

function describeFsError(e: unknown): string {
  const { code, syscall } = (e ?? {}) as { code?: unknown; syscall?: unknown };
  if (typeof code === 'string') return typeof syscall === 'string' ? `${code} on ${syscall}` : code;
  return e instanceof SyntaxError ? 'not valid JSON' : 'unreadable';
}

export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^-?\d+$/.test(raw)) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function num(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) throw new ConfigError(name, `must be a number between ${min} and ${max}, got "${raw}"`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (['on', 'true', '1', 'yes'].includes(raw)) return true;
  if (['off', 'false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `must be on or off, got "${raw}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const match = allowed.find((a) => a.toLowerCase() === raw.toLowerCase());
  if (!match) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  return match;
}

function url(env: Env, name: string): string | null {
  const raw = env[name]?.trim();
  if (!raw) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be an absolute URL, got "${raw}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ConfigError(name, 'must be an http(s) URL');
  return raw;
}

function stripSlash(s: string): string {
  return s.replace(/\/+$/, '');
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Buffer.isBuffer(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}
