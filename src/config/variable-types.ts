import { z } from 'zod';

// The value types of the declared variables (variables.ts): zod schemas from the variable's trimmed text to
// its value, each issue worded as the second half of a start-up error ("PORT: must be an integer, got "x"").

/** A whole number in [min, max]. */
export function int(min: number, max: number): z.ZodType<number, string> {
  const range = { error: (iss: { input: unknown }) => `must be between ${min} and ${max}, got ${String(iss.input)}` };
  return z
    .string()
    .regex(/^-?\d+$/, { error: (iss) => `must be an integer, got "${String(iss.input)}"` })
    .transform(Number)
    .pipe(z.number().min(min, range).max(max, range));
}

/** A number in [min, max]. */
export function num(min: number, max: number): z.ZodType<number, string> {
  const problem = (iss: { input: unknown }) => `must be a number between ${min} and ${max}, got "${String(iss.input)}"`;
  return z
    .string()
    .refine((raw) => Number.isFinite(Number(raw)) && Number(raw) >= min && Number(raw) <= max, { error: problem })
    .transform(Number);
}

/** on/off (also true/false, 1/0, yes/no), any case. */
export function onOff(): z.ZodType<boolean, string> {
  return z.string().transform((raw, ctx) => {
    const lower = raw.toLowerCase();
    if (['on', 'true', '1', 'yes'].includes(lower)) return true;
    if (['off', 'false', '0', 'no'].includes(lower)) return false;
    ctx.addIssue({ code: 'custom', input: raw, message: `must be on or off, got "${lower}"` });
    return z.NEVER;
  });
}

/** One of `allowed`, matched without regard to case and given back as spelled there. */
export function oneOf<const T extends string>(allowed: readonly T[], refused: Record<string, string> = {}): z.ZodType<T, string> {
  return z.string().transform((raw, ctx) => {
    const match = allowed.find((a) => a.toLowerCase() === raw.toLowerCase());
    if (match) return match;
    const message = refused[raw.toLowerCase()] ?? `must be one of ${allowed.join(', ')}, got "${raw}"`;
    ctx.addIssue({ code: 'custom', input: raw, message });
    return z.NEVER;
  });
}

/** An absolute http(s) URL, as written. */
export function httpUrl(): z.ZodType<string, string> {
  return z.string().transform((raw, ctx) => {
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      ctx.addIssue({ code: 'custom', input: raw, message: `must be an absolute URL, got "${raw}"` });
      return z.NEVER;
    }
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return raw;
    ctx.addIssue({ code: 'custom', input: raw, message: 'must be an http(s) URL' });
    return z.NEVER;
  });
}

/** Any text; `minLength` is checked without repeating the value (it may be a secret). */
export function text(minLength = 1): z.ZodType<string, string> {
  return z.string().min(minLength, { error: `must be at least ${minLength} characters` });
}

/** Comma-separated entries, each accepted by `valid` (blank entries are skipped). */
export function list(valid: (entry: string) => boolean, what: string): z.ZodType<string[], string> {
  return z.string().transform((raw, ctx) => {
    const entries = raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = entries.find((entry) => !valid(entry));
    if (bad === undefined) return entries;
    ctx.addIssue({ code: 'custom', input: raw, message: `each entry must be ${what}, got "${bad}"` });
    return z.NEVER;
  });
}

/** A value read by `parse`, which returns it or throws a VariableProblem naming what is wrong (never the value, when secret). */
export function parsedBy<T>(parse: (raw: string) => T): z.ZodType<T, string> {
  return z.string().transform((raw, ctx) => {
    try {
      return parse(raw);
    } catch (e) {
      if (!(e instanceof VariableProblem)) throw e;
      ctx.addIssue({ code: 'custom', input: raw, message: e.message });
      return z.NEVER;
    }
  });
}

/** What is wrong with a variable's value, said without its name (readVariables adds it). */
export class VariableProblem extends Error {}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration as `<n>ms`, `<n>s`, `<n>m` or `<n>h` (a bare number is milliseconds), in milliseconds, within [minMs, maxMs]. */
export function duration(minMs: number, maxMs: number): z.ZodType<number, string> {
  return z.string().transform((raw, ctx) => {
    const m = /^(\d+)(ms|s|m|h)?$/.exec(raw.toLowerCase());
    const ms = m ? Number(m[1]) * DURATION_UNITS[m[2] ?? 'ms'] : NaN;
    if (Number.isFinite(ms) && ms >= minMs && ms <= maxMs) return ms;
    ctx.addIssue({
      code: 'custom',
      input: raw,
      message: `must be a duration such as 30s, 5m or 1h, between ${minMs} ms and ${maxMs} ms, got "${raw}"`,
    });
    return z.NEVER;
  });
}
