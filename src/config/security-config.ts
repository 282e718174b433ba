import { parseAllowEntry } from '../events/target-policy.js';
import { ConfigError } from './app-config.js';

type Env = Record<string, string | undefined>;

/** The variables of docs/security.md's bounds that are not the HTTP server's timeouts. */
export interface SecurityConfig {
  /** EVENTS_TARGET_ALLOW_PRIVATE: addresses, CIDR ranges and host names event deliveries may reach although internal. */
  eventsTargetAllowPrivate: string[];
}

export function readSecurity(env: Env): SecurityConfig {
  return {
    eventsTargetAllowPrivate: list(
      env,
      'EVENTS_TARGET_ALLOW_PRIVATE',
      (entry) => parseAllowEntry(entry) !== null,
      'an address, a CIDR range or a host name',
    ),
  };
}

function list(env: Env, name: string, valid: (entry: string) => boolean, what: string): string[] {
  const entries = (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of entries) if (!valid(entry)) throw new ConfigError(name, `each entry must be ${what}, got "${entry}"`);
  return entries;
}
