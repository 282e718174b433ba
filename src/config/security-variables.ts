import { parseAllowEntry } from '../common/target-policy.js';
import { trustProxy } from './value-formats.js';
import { optional, variable } from './variable.js';
import { int, list, parsedBy, text } from './variable-types.js';

// docs/security.md's bounds other than the HTTP server's timeouts: sign-in and API key guessing, the proxies trusted
// to name the client, the internal targets event deliveries may reach, and who may read /metrics (security-config.ts
// maps them into the typed config).

const MINUTE = 60_000;
const DAY = 86_400_000;

/** Read at every start. */
export const SECURITY_VARIABLES = {
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
} as const;
