import { randomBytes } from 'node:crypto';
import { ConfigError } from './config-error.js';
import {
  ENVIRONMENT_NAMES,
  listingOf,
  readEnvironment,
  type CwsEnvironment,
  type EnvironmentName,
  type WorkflowListing,
} from './environment-config.js';
import { ENVIRONMENT_VARIABLES } from './environment-variables.js';
import { readKeys, type KeysConfig } from './keys-config.js';
import type { QuotaBudgets } from './quota-budgets.js';
import { LocalSecrets, PROCESS_HOST, randomClientSecret, resolveDataDir, type Host } from './local-data.js';
import { securityConfig, type SecurityConfig } from './security-config.js';
import { readTracing, type TracingConfig } from './tracing-config.js';
import { deepFreeze, EMBEDDED_DATABASE, stripSlash, type VaultKey } from './value-formats.js';
import { readVariable, readVariables, type Env } from './variable.js';
import { SERVICE_VARIABLES } from './variables.js';

export interface AppConfig {
  nodeEnv: string;
  production: boolean;
  port: number;
  publicUrl: string;
  dataDir: string;
  /** null (DATABASE_URL unset or `embedded`): an embedded PostgreSQL under dataDir is started (main.ts fills the URL in before the app boots). */
  databaseUrl: string | null;
  databasePoolSize: number;
  /** The first key is the active one; the others only decrypt. */
  vaultKeys: VaultKey[];
  vaultKeysGenerated: boolean;
  /** How often this instance records its key ids and re-reads the other instances' (vault-instances.service.ts). */
  vaultHeartbeatMs: number;
  /** Envelope encryption (docs/security.md, "Keys"): where the KEK lives and how long unwrapped data keys are kept. */
  keys: KeysConfig;
  operatorApiKey: string;
  operatorKeyGenerated: boolean;
  environments: Partial<Record<EnvironmentName, CwsEnvironment>>;
  /**
   * The in-process sandbox (SANDBOX=on), started by service.ts, which also configures the `sandbox` environment
   * from it. accessTokenTtlSeconds null: the sandbox's own default.
   */
  sandbox: {
    enabled: boolean;
    port: number;
    clientSecret: string;
    accessTokenTtlSeconds: number | null;
    quotas: QuotaBudgets;
    listing: WorkflowListing;
  };
  refresh: {
    at: number;
    intervalMs: number;
    batchSize: number;
    concurrency: number;
    /** Scheduled renewals started per second at most (0: no limit). */
    maxPerSecond: number;
    leaseMs: number;
    onDemandMarginMs: number;
    schedulerEnabled: boolean;
  };
  upstream: { connectTimeoutMs: number; headersTimeoutMs: number; bodyTimeoutMs: number; tokenTimeoutMs: number; retries: number };
  quota: { maxWaitMs: number }; // how long a call may wait for its upstream budget (docs/quotas.md)
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
  /** Event endpoints (docs/endpoints.md): ENDPOINT_DISABLE_AFTER in ms, ENDPOINTS_PER_TENANT. */
  endpoints: { disableAfterMs: number; perTenant: number };
  /** The audit trail (docs/observability.md, "Audit trail"): rows older than this many days are swept away. */
  audit: { retentionDays: number };
  /** Synced records (docs/records.md). */
  sync: SyncConfig;
  /** Agent sessions and their tools (docs/agents.md). */
  agents: { perUser: number; perTenant: number; workflowIdField: string; workflowStepField: string };
  logLevel: string;
  /** pretty: one readable line per entry, for a person at a terminal; json: one JSON object per line. */
  logFormat: 'json' | 'pretty';
  instanceId: string;
  /** OpenTelemetry trace export (docs/observability.md, "Traces"); null: off, no SDK loaded. */
  tracing: TracingConfig | null;
  /** docs/security.md's bounds: events targets, sign-in throttling, metrics access. */
  security: SecurityConfig;
}

export interface SyncConfig {
  /** SYNC_WORKFLOWS: sync for every tenant that does not say otherwise. */
  workflows: boolean;
  pollIntervalMs: number;
  /** The most of a company's read budget sync may spend. */
  budgetShare: number;
  tombstoneDays: number;
}

/**
 * Reads and validates every declared variable (variables.ts) once, into one frozen object. Nothing else reads
 * process.env. Outside production, missing local secrets are generated once and kept in $DATA_DIR (local-data.ts).
 */
export function loadConfig(env: Env, host: Host = PROCESS_HOST): AppConfig {
  const nodeEnv = readVariable('NODE_ENV', SERVICE_VARIABLES.NODE_ENV, env.NODE_ENV);
  const production = nodeEnv === 'production';
  const v = readVariables(env, SERVICE_VARIABLES, production);
  const databaseUrl = v.DATABASE_URL === EMBEDDED_DATABASE ? null : (v.DATABASE_URL ?? null);
  const dataDir = resolveDataDir(v.DATA_DIR, !databaseUrl, host);
  const local = production ? null : new LocalSecrets(dataDir);

  const vaultKeys = v.VAULT_KEYS ?? parseVaultKeys(generated(local, 'VAULT_KEYS').vaultKeys());
  const operatorApiKey = v.OPERATOR_API_KEY ?? generated(local, 'OPERATOR_API_KEY').operatorApiKey();

  const environments: Partial<Record<EnvironmentName, CwsEnvironment>> = {};
  for (const name of ENVIRONMENT_NAMES) {
    const e = readEnvironment(env, name, production);
    if (e) environments[name] = e;
  }
  const sandboxEnabled = v.SANDBOX ?? (!ENVIRONMENT_NAMES.some((name) => environments[name]) && !production);
  const sandboxPort = v.SANDBOX_PORT ?? (v.PORT === 0 ? 0 : v.PORT + 1);
  if (sandboxEnabled && environments.sandbox) {
    throw new ConfigError(
      'SANDBOX',
      'is on, so the sandbox environment is configured automatically: unset CWS_SANDBOX_* or set SANDBOX=off',
    );
  }
  if (sandboxEnabled && sandboxPort === 0) throw new ConfigError('SANDBOX_PORT', 'must be a fixed port when SANDBOX=on');

  const config: AppConfig = {
    nodeEnv,
    production,
    port: v.PORT,
    publicUrl: stripSlash(v.PUBLIC_URL ?? `http://localhost:${v.PORT}`),
    dataDir,
    databaseUrl,
    databasePoolSize: v.DATABASE_POOL_SIZE,
    vaultKeys,
    vaultKeysGenerated: !v.VAULT_KEYS,
    vaultHeartbeatMs: v.VAULT_HEARTBEAT_MS,
    keys: readKeys(v),
    operatorApiKey,
    operatorKeyGenerated: !v.OPERATOR_API_KEY,
    environments,
    sandbox: {
      enabled: sandboxEnabled,
      port: sandboxPort,
      clientSecret: sandboxEnabled ? (local?.sandboxClientSecret() ?? randomClientSecret()) : '',
      accessTokenTtlSeconds: v.SANDBOX_TOKEN_TTL_SECONDS ?? null,
      quotas: sandboxEnabled ? readVariables(env, ENVIRONMENT_VARIABLES, production, 'CWS_SANDBOX_').QUOTAS : {},
      listing: listingOf(readVariables(env, ENVIRONMENT_VARIABLES, production, 'CWS_SANDBOX_')),
    },
    refresh: {
      at: v.REFRESH_AT,
      intervalMs: v.REFRESH_INTERVAL_MS,
      batchSize: v.REFRESH_BATCH_SIZE,
      concurrency: v.REFRESH_CONCURRENCY,
      maxPerSecond: v.REFRESH_MAX_PER_SECOND,
      leaseMs: v.REFRESH_LEASE_MS,
      onDemandMarginMs: v.REFRESH_MARGIN_MS,
      schedulerEnabled: v.REFRESH_SCHEDULER,
    },
    upstream: {
      connectTimeoutMs: v.UPSTREAM_CONNECT_TIMEOUT_MS,
      headersTimeoutMs: v.UPSTREAM_TIMEOUT_MS,
      bodyTimeoutMs: v.UPSTREAM_BODY_TIMEOUT_MS,
      tokenTimeoutMs: v.UPSTREAM_TOKEN_TIMEOUT_MS,
      retries: v.UPSTREAM_RETRIES,
    },
    quota: { maxWaitMs: v.QUOTA_MAX_WAIT_MS },
    http: {
      headersTimeoutMs: v.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: v.HTTP_REQUEST_TIMEOUT_MS,
      idleTimeoutMs: v.HTTP_IDLE_TIMEOUT_MS,
      keepAliveTimeoutMs: v.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      bodyTimeoutMs: v.HTTP_BODY_TIMEOUT_MS,
      tenantMaxInFlight: v.FACADE_TENANT_MAX_IN_FLIGHT,
      tenantMaxUploads: v.FACADE_TENANT_MAX_UPLOADS,
    },
    shutdown: { delayMs: v.SHUTDOWN_DELAY_MS, timeoutMs: v.SHUTDOWN_TIMEOUT_MS },
    events: {
      retryBaseMs: v.EVENTS_RETRY_BASE_MS,
      retryMaxMs: v.EVENTS_RETRY_MAX_MS,
      retrySpanMs: v.EVENTS_RETRY_SPAN_MS,
      attemptTimeoutMs: v.EVENTS_ATTEMPT_TIMEOUT_MS,
      pollIntervalMs: v.EVENTS_POLL_INTERVAL_MS,
      relayIntervalMs: v.EVENTS_RELAY_INTERVAL_MS,
      batchSize: v.EVENTS_BATCH_SIZE,
      jobExpireSeconds: v.EVENTS_JOB_EXPIRE_SECONDS,
      maintenanceSeconds: v.EVENTS_MAINTENANCE_SECONDS,
      inboundCommitsInFlight: v.INBOUND_COMMITS_IN_FLIGHT,
      retentionDays: v.EVENT_RETENTION_DAYS,
    },
    endpoints: { disableAfterMs: v.ENDPOINT_DISABLE_AFTER, perTenant: v.ENDPOINTS_PER_TENANT },
    audit: { retentionDays: v.AUDIT_RETENTION_DAYS },
    sync: {
      workflows: v.SYNC_WORKFLOWS,
      pollIntervalMs: v.SYNC_POLL_INTERVAL,
      budgetShare: v.SYNC_BUDGET_SHARE,
      tombstoneDays: v.SYNC_TOMBSTONE_DAYS,
    },
    agents: {
      perUser: v.AGENT_SESSIONS_PER_USER,
      perTenant: v.AGENT_SESSIONS_PER_TENANT,
      workflowIdField: v.AGENT_WORKFLOW_ID_FIELD,
      workflowStepField: v.AGENT_WORKFLOW_STEP_FIELD,
    },
    logLevel: v.LOG_LEVEL,
    logFormat: v.LOG_FORMAT ?? (host.stdoutIsTty ? 'pretty' : 'json'),
    instanceId: v.INSTANCE_ID ?? `${process.pid}-${randomBytes(3).toString('hex')}`,
    tracing: readTracing(env, v, production),
    security: securityConfig(v),
  };
  checkTogether(config);
  return deepFreeze(config);
}

/** The rules between variables. */
function checkTogether(config: AppConfig): void {
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
}

/** Local secrets for a variable left unset: only outside production, where VAULT_KEYS' and OPERATOR_API_KEY's rules allow it. */
function generated(local: LocalSecrets | null, variable: string): LocalSecrets {
  if (!local) throw new ConfigError(variable, 'is required when NODE_ENV=production');
  return local;
}

/** VAULT_KEYS' format (the first key is the active one); a ConfigError naming VAULT_KEYS, without key material, when it is not. */
export function parseVaultKeys(raw: string): VaultKey[] {
  const keys = readVariable('VAULT_KEYS', SERVICE_VARIABLES.VAULT_KEYS, raw);
  if (!keys) throw new ConfigError('VAULT_KEYS', 'holds no key');
  return keys;
}
