import proxyaddr from 'proxy-addr';
import { VariableProblem } from './variable-types.js';

// The formats of the variables that are more than a number, a word or a URL (variables.ts declares which reads which).

export interface VaultKey {
  kid: string;
  key: Buffer;
}

/** VAULT_KEYS: `kid:base64(32 bytes)` entries, comma separated, in order (the first is the active key). Never quotes key material. */
export function vaultKeyRing(raw: string): VaultKey[] {
  const keys = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const i = entry.indexOf(':');
      const kid = i > 0 ? entry.slice(0, i) : '';
      if (!/^[A-Za-z0-9_-]{1,32}$/.test(kid)) {
        throw new VariableProblem('each entry must be kid:base64(32 bytes), kid of letters, digits, - or _ (at most 32)');
      }
      const key = Buffer.from(entry.slice(i + 1), 'base64');
      if (key.length !== 32) throw new VariableProblem(`key "${kid}" must decode to exactly 32 bytes`);
      return { kid, key };
    });
  if (keys.length === 0) throw new VariableProblem('holds no key');
  if (new Set(keys.map((k) => k.kid)).size !== keys.length) throw new VariableProblem('key ids must be unique');
  return keys;
}

/** `key=value,key2=value2`, values percent-encoded (the OpenTelemetry specification's format). The values are not quoted in errors. */
export function otlpHeaders(raw: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of raw.split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    const name = eq > 0 ? pair.slice(0, eq).trim() : '';
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new VariableProblem('must be a comma-separated list of name=value pairs');
    try {
      headers[name.toLowerCase()] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new VariableProblem(`the value of ${name} is not valid percent-encoding`);
    }
  }
  return headers;
}

/** DATABASE_URL's value that names this instance's own PostgreSQL under DATA_DIR instead of a server. */
export const EMBEDDED_DATABASE = 'embedded';

/** DATABASE_URL: a PostgreSQL connection string (not repeated: it may hold a password), or `embedded`. */
export function postgresUrl(raw: string): string {
  if (raw === EMBEDDED_DATABASE) return raw;
  if (!/^postgres(ql)?:\/\//.test(raw))
    throw new VariableProblem("must be a postgres:// or postgresql:// connection string, or `embedded` (this instance's own PostgreSQL)");
  return raw;
}

/** The space-separated scopes of CWS_<ENV>_SCOPES. */
export function scopeList(raw: string): string[] {
  return raw.split(/\s+/).filter(Boolean);
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

/** Which sockets are proxies whose X-Forwarded-For is believed: the hops nearest this server, or address ranges. */
export type TrustProxy = { hops: number } | { ranges: string[] };

/**
 * TRUST_PROXY: `none` (the socket's address only), a hop count (that many nearest hops are proxies), or addresses
 * and CIDR ranges, comma separated, with the names `loopback`, `linklocal` and `uniquelocal`.
 */
export function trustProxy(raw: string): TrustProxy {
  if (raw.toLowerCase() === 'none') return { ranges: [] };
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 32) throw new VariableProblem(`a hop count must be between 0 and 32, got ${raw}`);
    return { hops };
  }
  const ranges = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  try {
    proxyaddr.compile(ranges);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new VariableProblem(
      `must be none, a hop count, or addresses, CIDR ranges, loopback, linklocal or uniquelocal, comma separated (${why})`,
    );
  }
  return { ranges };
}

/** A URL without its trailing slashes. */
export function stripSlash(s: string): string {
  return s.replace(/\/+$/, '');
}

/** The loaded configuration, frozen all the way down (Buffers excepted). */
export function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Buffer.isBuffer(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

const DURATION_UNITS_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** ENDPOINT_DISABLE_AFTER: a duration `<n>s`, `<n>m`, `<n>h` or `<n>d`, at least 10 s and at most 365 d; in ms. */
export function endpointDisableAfter(raw: string): number {
  const m = /^(\d{1,9})(s|m|h|d)$/.exec(raw.trim());
  if (!m) throw new VariableProblem(`must be a duration such as 5d, 36h, 90m or 10s, got "${raw}"`);
  const ms = Number(m[1]) * DURATION_UNITS_MS[m[2]];
  if (ms < 10_000 || ms > 365 * 86_400_000) throw new VariableProblem('must be between 10s and 365d');
  return ms;
}
