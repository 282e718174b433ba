import { AGENT_VARIABLES } from './agent-variables.js';
import { EVENT_VARIABLES } from './event-variables.js';
import { SECRET_VARIABLES } from './secret-variables.js';
import { SECURITY_VARIABLES } from './security-variables.js';
import { SYNC_VARIABLES } from './sync-variables.js';
import { TRACING_SWITCH } from './tracing-variables.js';
import { postgresUrl } from './value-formats.js';
import { optional, variable } from './variable.js';
import { httpUrl, int, num, oneOf, onOff, parsedBy, text } from './variable-types.js';

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

  ...SECRET_VARIABLES,

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

  ...SECURITY_VARIABLES,

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

  ...EVENT_VARIABLES,

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
