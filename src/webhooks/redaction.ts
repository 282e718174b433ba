export const REDACTED = '[REDACTED]';

/**
 * A copy of a JSON value with every `Authorization` value (any letter case, at any depth, e.g. inside a
 * webhook's `headers`) replaced, and any of `secrets` replaced wherever it appears inside a string.
 */
export function redactAuthorization(value: unknown, secrets: readonly string[] = []): unknown {
  if (typeof value === 'string') return scrub(value, secrets);
  if (Array.isArray(value)) return value.map((v) => redactAuthorization(v, secrets));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = k.toLowerCase() === 'authorization' ? REDACTED : redactAuthorization(v, secrets);
    return out;
  }
  return value;
}

function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join(REDACTED);
  return out;
}
