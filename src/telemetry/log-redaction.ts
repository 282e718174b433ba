/** Field names whose values never reach a log line, wherever they sit in a logged object. */
const SECRET_KEY = /(token|secret|password|passwd|authorization|cookie|api[-_]?key|^key$|credential|^code$|^state$)/i;
/** Field names whose values are URLs (request targets, redirects, referrers): logged through redactUrl. */
const URL_KEY = /^(url|originalurl|location|content-location|referer|referrer)$/i;
/**
 * Path segments that are secrets themselves: the connect link's token (`/connect/<token>`, API.md 5).
 * Matched in any letter case and after any run of slashes (or an encoded one), whether or not it routes.
 */
const SECRET_PATH = /(\/connect(?:\/|%2f)+)[^?#]+/gi;
const MAX_DEPTH = 8;
export const REDACTED = '[redacted]';

export function redactSecrets(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
  if (Buffer.isBuffer(value)) return value;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  // Only plain data is walked: class instances (the request and response pino-http hands to its own
  // serializers) pass through untouched, to be serialized (and redacted) there. Plain means a root
  // prototype of any realm: Node's own objects (request headers) are not of a test runner's realm.
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== null && Object.getPrototypeOf(proto) !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (SECRET_KEY.test(k) && v !== null && v !== undefined) out[k] = REDACTED;
    else if (URL_KEY.test(k) && typeof v === 'string') out[k] = redactUrl(v);
    else out[k] = redactSecrets(v, depth + 1);
  }
  return out;
}

/**
 * A URL or request target as it may be logged: secret path segments replaced, and the values of
 * sensitive query parameters (OAuth codes and states) dropped.
 */
export function redactUrl(url: string | undefined): string | undefined {
  if (!url) return url;
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).replace(SECRET_PATH, `$1${REDACTED}`);
  if (q < 0) return path;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) if (SECRET_KEY.test(key)) params.set(key, REDACTED);
  return `${path}?${params.toString()}`;
}
