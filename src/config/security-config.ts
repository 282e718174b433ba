import { parseAllowEntry } from '../events/target-policy.js';
import { ConfigError, int } from './app-config.js';

type Env = Record<string, string | undefined>;

/** The variables of docs/security.md's bounds that are not the HTTP server's timeouts. */
export interface SecurityConfig {
  /** EVENTS_TARGET_ALLOW_PRIVATE: addresses, CIDR ranges and host names event deliveries may reach although internal. */
  eventsTargetAllowPrivate: string[];
  /** Failed console sign-ins per client, and from all clients together, per window (429 past them). */
  signInMaxFailuresPerClient: number;
  signInMaxFailures: number;
  /** Failed API keys (and console sessions) per client per window on /v1. */
  apiKeyMaxFailuresPerClient: number;
  authFailureWindowMs: number;
  /** METRICS_TOKEN: the bearer /metrics asks for; null: none. */
  metricsToken: string | null;
  /** METRICS_PORT: /metrics on a server of its own (and not on PORT); null: none. METRICS_HOST: its address. */
  metricsPort: number | null;
  metricsHost: string;
}

export function readSecurity(env: Env): SecurityConfig {
  return {
    signInMaxFailuresPerClient: int(env, 'SIGN_IN_MAX_FAILURES_PER_CLIENT', 10, 1, 100_000),
    signInMaxFailures: int(env, 'SIGN_IN_MAX_FAILURES', 100, 1, 1_000_000),
    apiKeyMaxFailuresPerClient: int(env, 'API_KEY_MAX_FAILURES_PER_CLIENT', 100, 1, 1_000_000),
    authFailureWindowMs: int(env, 'AUTH_FAILURE_WINDOW_MS', 60_000, 1000, 86_400_000),
    metricsToken: metricsToken(env),
    metricsPort: env.METRICS_PORT?.trim() ? int(env, 'METRICS_PORT', 0, 0, 65535) : null,
    metricsHost: env.METRICS_HOST?.trim() || '0.0.0.0',
    eventsTargetAllowPrivate: list(
      env,
      'EVENTS_TARGET_ALLOW_PRIVATE',
      (entry) => parseAllowEntry(entry) !== null,
      'an address, a CIDR range or a host name',
    ),
  };
}

function metricsToken(env: Env): string | null {
  const token = env.METRICS_TOKEN?.trim();
  if (!token) return null;
  if (token.length < 16) throw new ConfigError('METRICS_TOKEN', 'must be at least 16 characters');
  return token;
}

function list(env: Env, name: string, valid: (entry: string) => boolean, what: string): string[] {
  const entries = (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of entries) if (!valid(entry)) throw new ConfigError(name, `each entry must be ${what}, got "${entry}"`);
  return entries;
}

/**
 * A key's strength as an attacker must assume it: its length times log2 of the alphabet of the character
 * classes it uses (lower case 26, upper case 26, digits 10, anything else 33); a key of fewer than 10
 * distinct characters (`aaaa…`, `abab…`) counts as none.
 */
export function estimatedBits(key: string): number {
  if (new Set(key).size < 10) return 0;
  let alphabet = 0;
  if (/[a-z]/.test(key)) alphabet += 26;
  if (/[A-Z]/.test(key)) alphabet += 26;
  if (/[0-9]/.test(key)) alphabet += 10;
  if (/[^a-zA-Z0-9]/.test(key)) alphabet += 33;
  return key.length * Math.log2(alphabet);
}
