/** Field names whose values never reach a log line, wherever they sit in a logged object. */
const SECRET_KEY = /(token|secret|password|passwd|authorization|cookie|api[-_]?key|^key$|credential|^code$|^state$)/i;
const MAX_DEPTH = 8;
export const REDACTED = '[redacted]';

export function redactSecrets(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
  if (Buffer.isBuffer(value)) return value;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  // Only plain data is walked: class instances (the request and response pino-http hands to its own
  // serializers) pass through untouched, to be serialized (and redacted) there.
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEY.test(k) && v !== null && v !== undefined ? REDACTED : redactSecrets(v, depth + 1);
  }
  return out;
}

/** Query strings can carry OAuth codes and states; keep the path, drop the values of sensitive params. */
export function redactUrl(url: string | undefined): string | undefined {
  if (!url) return url;
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) if (SECRET_KEY.test(key)) params.set(key, REDACTED);
  return `${url.slice(0, q)}?${params.toString()}`;
}
