import { parseAllowEntry } from '../common/target-policy.js';
import { AGENT_VARIABLES } from './agent-variables.js';
import { SYNC_VARIABLES } from './sync-variables.js';
import { TRACING_SWITCH } from './tracing-variables.js';
import { endpointDisableAfter, estimatedBits, postgresUrl, trustProxy, vaultKeyRing } from './value-formats.js';
import { optional, variable } from './variable.js';
import { duration, httpUrl, int, list, num, oneOf, onOff, parsedBy, text } from './variable-types.js';

// Every environment variable cws-connect reads, declared once: loadConfig (app-config.ts) reads them through
// readVariables, and the configuration tables of docs/configuration.md and docs/api.md are made from them (config-tables.ts).
// Declaration order is the order of the checks at start, so NODE_ENV comes first.

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** The variables read at every start. */
export const SERVICE_VARIABLES = {
  NODE_ENV: variable(
    'the service',
    text(),
    'development',
    'production mode: `production` applies the rules of the last column (other values: `development`, `test`)',
  ),
  PORT: variable('the service', int(0, 65535), 3000, 'HTTP port'),
  PUBLIC_URL: optional('the service', httpUrl(), 'the address browsers and the upstream use to reach this service', {
    defaultText: '`http://localhost:$PORT`',
  }),
  DATA_DIR: optional('the service', text(), 'where local state lives when nothing else is configured (embedded database, generated keys)', {
    defaultText: '`.data`; as root when the `postgres` user cannot enter the working directory, `/var/lib/cws-connect/<dir>-<hash>`',
    production: 'holds only the embedded database: nothing is generated',
  }),
  LOG_LEVEL: variable('the service', oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info', 'the level of logging'),
  LOG_FORMAT: optional('the service', oneOf(['json', 'pretty']), '`json` (one object per line) or `pretty` (one readable line per entry)', {
    defaultText: '`pretty` when stdout is a terminal, else `json`',
  }),
  INSTANCE_ID: optional('the service', text(), "this instance's name in logs and leases", {
    defaultText: 'the process id and a random suffix',
  }),

  DATABASE_URL: optional(
    'database',
    parsedBy(postgresUrl),
    "PostgreSQL connection string, or `embedded`: this instance's own PostgreSQL under `$DATA_DIR` (one database per instance)",
    {
      defaultText: '`embedded` outside production',
      production: '**required**: a connection string, or `embedded` said explicitly',
      productionCheck: (url) =>
        url
          ? null
          : "is required when NODE_ENV=production: the shared PostgreSQL's postgres:// connection string, or `embedded` for this instance's own database",
    },
  ),
  DATABASE_POOL_SIZE: variable('database', int(2, 500), 20, "connections in this instance's pool"),

  VAULT_KEYS: optional(
    'secrets',
    parsedBy(vaultKeyRing),
    'key ring for the token vault: `kid:base64(32 bytes)` entries separated by commas; the first is the active key, the others only decrypt',
    {
      defaultText: 'unset: a key is generated once, stored under `$DATA_DIR`, and a warning is logged',
      production: '**required**: no start without it',
      productionCheck: (keys) => (keys ? null : 'is required when NODE_ENV=production (kid:base64 of 32 bytes, comma separated)'),
    },
  ),
  VAULT_HEARTBEAT_MS: variable(
    'secrets',
    int(100, MINUTE),
    5000,
    "how often an instance records the vault key ids it holds and re-reads the others' (a key seals only once every live instance holds it; an instance unseen for 3 beats is gone), ms",
  ),
  KEY_STORE: variable(
    'secrets',
    oneOf(['local', 'pkcs11', 'transit'] as const),
    'local',
    "where the key-encryption key (KEK) that wraps each tenant's data key lives: `local` (the `VAULT_KEYS` ring), `pkcs11` (a PKCS#11 module: an HSM, SoftHSM2) or `transit` (a HashiCorp Vault / OpenBao Transit secrets engine); docs/keys.md",
  ),
  PKCS11_MODULE: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the path of the PKCS#11 module (a `.so`)', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_TOKEN_LABEL: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the label of the token holding the KEK', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_PIN: optional('secrets', text(), "with `KEY_STORE=pkcs11`: the token's user PIN (a secret: never logged)", {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_KEK_LABEL: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the label of the AES key on the token that wraps the data keys', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  TRANSIT_ADDR: optional('secrets', httpUrl(), 'with `KEY_STORE=transit`: the Vault / OpenBao server (`https://vault.internal:8200`)', {
    defaultText: 'unset (required with `transit`)',
  }),
  TRANSIT_TOKEN: optional('secrets', text(), 'with `KEY_STORE=transit`: the token sent as `X-Vault-Token` (a secret: never logged)', {
    defaultText: 'unset (required with `transit`)',
  }),
  TRANSIT_KEY_NAME: optional(
    'secrets',
    text(),
    'with `KEY_STORE=transit`: the Transit key (type `aes256-gcm96`) that wraps the data keys',
    {
      defaultText: 'unset (required with `transit`)',
    },
  ),
  TRANSIT_MOUNT: variable('secrets', text(), 'transit', "with `KEY_STORE=transit`: the Transit secrets engine's mount path"),
  TRANSIT_NAMESPACE: optional('secrets', text(), 'with `KEY_STORE=transit`: the namespace sent as `X-Vault-Namespace`', {
    defaultText: 'unset: none sent',
  }),
  TRANSIT_CA_FILE: optional('secrets', text(), 'with `KEY_STORE=transit`: a PEM file of the CA certificates trusted for `TRANSIT_ADDR`', {
    defaultText: "unset: the system's CAs",
  }),
  KEY_CACHE_TTL: variable(
    'secrets',
    duration(1000, 24 * HOUR),
    5 * MINUTE,
    "how long an unwrapped tenant data key is kept in an instance's memory before it is unwrapped again (`30s`, `5m`, `1h`)",
    { defaultText: '`5m`' },
  ),
  KEY_CACHE_GRACE: variable(
    'secrets',
    duration(0, 7 * 24 * HOUR),
    10 * MINUTE,
    'how long past `KEY_CACHE_TTL` a cached data key may still serve while the key store is unreachable',
    { defaultText: '`10m`' },
  ),
  // 128 bits: e.g. 22 random base64url characters, or 32 hex digits.
  OPERATOR_API_KEY: optional('secrets', text(32), 'the operator credential (manages tenants and keys), at least 32 characters', {
    defaultText: 'unset: generated once, stored under `$DATA_DIR`, printed at startup',
    production: '**required**, and at least 128 bits strong (`openssl rand -base64 32`)',
    productionCheck: (key) =>
      !key
        ? 'is required when NODE_ENV=production'
        : estimatedBits(key) < 128
          ? 'is weaker than 128 bits in production: use `openssl rand -base64 32` or longer'
          : null,
  }),

  SANDBOX: optional(
    'the built-in sandbox',
    onOff(),
    '`on`: start the built-in emulator of the upstream API in-process and configure the `sandbox` environment to point at it',
    { defaultText: '`on` when no `CWS_<ENV>_AUTH_URL` is set, else `off`', production: '`off` unless set' },
  ),
  SANDBOX_PORT: optional('the built-in sandbox', int(0, 65535), "the in-process sandbox's port (a fixed one)", { defaultText: '`PORT+1`' }),
  SANDBOX_TOKEN_TTL_SECONDS: optional(
    'the built-in sandbox',
    int(1, 10 * 365 * 86_400),
    "the in-process sandbox's access-token lifetime, s",
    {
      defaultText: "the sandbox's own, `21600`",
    },
  ),

  REFRESH_AT: variable('renewal', num(0.1, 0.95), 0.8, "fraction of an access token's lifetime after which it is renewed"),
  REFRESH_INTERVAL_MS: variable(
    'renewal',
    int(100, HOUR),
    5000,
    'how often the renewal scheduler looks for due connections, ms (see `docs/renewal.md`)',
  ),
  REFRESH_BATCH_SIZE: variable('renewal', int(1, 10_000), 100, 'connections the renewal scheduler claims per batch'),
  REFRESH_CONCURRENCY: variable(
    'renewal',
    int(1, 1000),
    8,
    'renewals in flight per instance at most (a cap: never more than connections due)',
  ),
  REFRESH_MAX_PER_SECOND: variable(
    'renewal',
    int(0, 100_000),
    100,
    'scheduled renewals an instance starts per second at most (`0`: no limit; see `docs/renewal.md`)',
  ),
  REFRESH_LEASE_MS: variable(
    'renewal',
    int(1000, HOUR),
    MINUTE,
    'how long a renewal lease lasts, ms (more than twice `UPSTREAM_TOKEN_TIMEOUT_MS`)',
  ),
  REFRESH_MARGIN_MS: variable('renewal', int(0, HOUR), MINUTE, 'a call renews first when its token expires within this margin, ms'),
  REFRESH_SCHEDULER: variable('renewal', onOff(), true, '`off` leaves only on-demand renewal in this instance'),

  UPSTREAM_CONNECT_TIMEOUT_MS: variable('upstream HTTP', int(100, 10 * MINUTE), 5000, 'connecting to the upstream, ms'),
  UPSTREAM_TIMEOUT_MS: variable(
    'upstream HTTP',
    int(100, HOUR),
    30_000,
    "the upstream's response headers, ms (past it `504 upstream_timeout`)",
  ),
  UPSTREAM_BODY_TIMEOUT_MS: variable('upstream HTTP', int(100, HOUR), 300_000, 'the longest pause inside an upstream body, ms'),
  UPSTREAM_TOKEN_TIMEOUT_MS: variable('upstream HTTP', int(100, 10 * MINUTE), 15_000, 'token calls to the upstream, ms'),
  UPSTREAM_RETRIES: variable('upstream HTTP', int(0, 10), 2, 'retries of idempotent upstream calls on connection errors and 502/503/504'),
  QUOTA_MAX_WAIT_MS: variable(
    'upstream HTTP',
    int(0, 10_000),
    250,
    "how long a call may wait for its company's upstream budget before it is refused (`429 quota_exhausted`), ms (see `docs/quotas.md`)",
  ),

  HTTP_HEADERS_TIMEOUT_MS: variable(
    'this HTTP server',
    int(100, 10 * MINUTE),
    15_000,
    'all request headers must arrive within this, ms (see `docs/security.md`)',
  ),
  HTTP_REQUEST_TIMEOUT_MS: variable('this HTTP server', int(1000, DAY), HOUR, 'a whole request, ms (a 1 GiB upload needs about 300 KB/s)'),
  HTTP_IDLE_TIMEOUT_MS: variable(
    'this HTTP server',
    int(100, HOUR),
    120_000,
    'a connection with no traffic either way is closed after this, ms (more than `UPSTREAM_TIMEOUT_MS`)',
  ),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: variable(
    'this HTTP server',
    int(100, 10 * MINUTE),
    5000,
    'an idle keep-alive connection is closed after this, ms',
  ),
  HTTP_BODY_TIMEOUT_MS: variable(
    'this HTTP server',
    int(100, 10 * MINUTE),
    30_000,
    'a request body with no new byte for this long is cut (`408`); a progressing upload never is',
  ),
  // The upstream pool has 256 sockets per origin: one tenant may hold at most a quarter of them by default.
  FACADE_TENANT_MAX_IN_FLIGHT: variable(
    'this HTTP server',
    int(1, 255),
    64,
    'facade calls one tenant may have in flight at once; past it, `429 too_many_requests` with `Retry-After`',
  ),
  FACADE_TENANT_MAX_UPLOADS: variable(
    'this HTTP server',
    int(1, 255),
    16,
    'streamed uploads one tenant may have open at once, among its calls in flight',
  ),

  SIGN_IN_MAX_FAILURES_PER_CLIENT: variable(
    'guessing, internal targets, exposure',
    int(1, 100_000),
    10,
    'failed console sign-ins per client per window; past it `429 too_many_requests` with `Retry-After`',
  ),
  SIGN_IN_MAX_FAILURES: variable(
    'guessing, internal targets, exposure',
    int(1, 1_000_000),
    100,
    'failed console sign-ins from all clients together per window (`429` past it)',
  ),
  API_KEY_MAX_FAILURES_PER_CLIENT: variable(
    'guessing, internal targets, exposure',
    int(1, 1_000_000),
    100,
    'failed `/v1` credentials (API keys, console sessions) per client per window (past it a wrong one is `429`)',
  ),
  AUTH_FAILURE_WINDOW_MS: variable(
    'guessing, internal targets, exposure',
    int(1000, DAY),
    MINUTE,
    'the window of the three bounds above, ms',
  ),
  TRUST_PROXY: variable(
    'guessing, internal targets, exposure',
    parsedBy(trustProxy),
    { ranges: ['loopback'] },
    'the proxies whose `X-Forwarded-For` names the client: `none`, a hop count, or addresses and CIDR ranges (see `docs/security.md`)',
    { defaultText: '`loopback` (a proxy on this host)' },
  ),
  EVENTS_TARGET_ALLOW_PRIVATE: variable(
    'guessing, internal targets, exposure',
    list((entry) => parseAllowEntry(entry) !== null, 'an address, a CIDR range or a host name'),
    [],
    'internal addresses, CIDR ranges and host names event deliveries may reach, comma separated; other internal targets: `422 target_not_allowed` (see `docs/security.md`)',
    { defaultText: 'empty (loopback allowed)', production: 'loopback only when listed' },
  ),
  METRICS_TOKEN: optional(
    'guessing, internal targets, exposure',
    text(16),
    '`/metrics` only to this bearer (at least 16 characters); with neither it nor `METRICS_PORT`, `/metrics` is open',
    { defaultText: 'unset', production: 'with neither it nor `METRICS_PORT`, `/metrics` answers `404`' },
  ),
  METRICS_PORT: optional('guessing, internal targets, exposure', int(0, 65535), '`/metrics` on a port of its own, and not on `PORT`', {
    defaultText: 'unset',
  }),
  METRICS_HOST: variable('guessing, internal targets, exposure', text(), '0.0.0.0', "the address of `METRICS_PORT`'s server"),

  SHUTDOWN_DELAY_MS: variable(
    'shutdown',
    int(0, 10 * MINUTE),
    5000,
    'after SIGTERM/SIGINT: how long requests are still served while `/health/ready` says 503, ms (see `docs/operations.md`)',
  ),
  SHUTDOWN_TIMEOUT_MS: variable(
    'shutdown',
    int(100, HOUR),
    25_000,
    'after the delay: the longest wait for requests in flight, renewals and deliveries before exiting, ms',
  ),

  EVENTS_RETRY_BASE_MS: variable(
    'events to the partner',
    int(1, HOUR),
    10_000,
    'the first retry delay of an event delivery, ms, doubling per attempt up to `EVENTS_RETRY_MAX_MS`, with jitter (see `docs/webhooks.md`)',
  ),
  EVENTS_RETRY_MAX_MS: variable('events to the partner', int(1, DAY), HOUR, 'the longest delay between two delivery attempts, ms'),
  EVENTS_RETRY_SPAN_MS: variable(
    'events to the partner',
    int(0, 30 * DAY),
    DAY,
    'how long an event is retried before it is dead-lettered, ms',
  ),
  EVENTS_ATTEMPT_TIMEOUT_MS: variable('events to the partner', int(100, 10 * MINUTE), 15_000, "one delivery attempt's timeout, ms"),
  EVENTS_POLL_INTERVAL_MS: variable('events to the partner', int(500, MINUTE), 1000, 'how often delivery workers poll the job queue, ms'),
  EVENTS_RELAY_INTERVAL_MS: variable(
    'events to the partner',
    int(20, MINUTE),
    1000,
    'how often the relay moves new events to the job queue, ms',
  ),
  EVENTS_BATCH_SIZE: variable('events to the partner', int(1, 1000), 50, 'delivery jobs fetched per poll'),
  EVENTS_JOB_EXPIRE_SECONDS: variable(
    'events to the partner',
    int(1, 86_400),
    120,
    'a delivery job held by a killed instance is retried elsewhere after this many seconds',
  ),
  EVENTS_MAINTENANCE_SECONDS: variable('events to the partner', int(1, 3600), 60, "the job queue's (pg-boss) maintenance interval, s"),
  INBOUND_COMMITS_IN_FLIGHT: variable(
    'events to the partner',
    int(1, 8),
    1,
    'inbound group commits written at once, 1 to 8 (see `docs/webhooks.md`, Inbound): more hide a slow WAL flush, fewer spend less database CPU per delivery',
  ),
  EVENT_RETENTION_DAYS: variable(
    'events to the partner',
    int(1, 400),
    30,
    'days events and their delivery attempts are kept, unless a tenant sets its own `eventRetentionDays` (1–400); see `docs/data-retention.md`',
  ),

  ENDPOINT_DISABLE_AFTER: variable(
    'events to the partner',
    parsedBy(endpointDisableAfter),
    5 * DAY,
    'an added event endpoint whose every attempt has failed for this long (over at least 10 events) is disabled: `10s` to `365d` (see `docs/endpoints.md`)',
    { defaultText: '`5d`' },
  ),
  ENDPOINTS_PER_TENANT: variable(
    'events to the partner',
    int(1, 1000),
    20,
    'most event endpoints per tenant, eventsTargetUrl included (1–1000)',
  ),

  AUDIT_RETENTION_DAYS: variable(
    'audit trail',
    int(1, 3650),
    400,
    'days an audit row is kept (1 to 3650); older rows are swept every 10 minutes in batches (see `docs/observability.md`, Audit trail)',
  ),

  ...AGENT_VARIABLES,
  ...SYNC_VARIABLES,
  ...TRACING_SWITCH,
} as const;
