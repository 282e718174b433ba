import type { z } from 'zod';
import { ConfigError } from './config-error.js';

/** Where a variable is listed in the configuration tables (docs/configuration.md, docs/api.md). */
export type Section =
  | 'the service'
  | 'database'
  | 'secrets'
  | 'upstream environments'
  | 'the built-in sandbox'
  | 'renewal'
  | 'upstream HTTP'
  | 'this HTTP server'
  | 'guessing, internal targets, exposure'
  | 'shutdown'
  | 'events to the partner'
  | 'audit trail'
  | 'agents (MCP)'
  | 'synced records'
  | 'traces';

/** One environment variable, declared once: how it parses, its default, its production rule and what it means. */
export interface Variable<T> {
  /** Parses the trimmed, non-blank value; its issue's message follows the name in the start-up error. */
  readonly schema: z.ZodType<T, string>;
  /** The value when the variable is unset or blank (undefined: the reader of the value decides, see `defaultText`). */
  readonly fallback: T;
  /** One line for the tables. */
  readonly meaning: string;
  readonly section: Section;
  /** The default as the tables state it, when it is not `fallback` as is. */
  readonly defaultText?: string;
  /** What production (NODE_ENV=production) changes, as the tables state it. */
  readonly production?: string;
  /** Enforces the production rule: the problem with the value in production, or null. */
  productionCheck?(value: T): string | null;
}

type Docs<T> = Pick<Variable<T>, 'defaultText' | 'production' | 'productionCheck'>;

/** A variable with a default value. */
export function variable<T>(section: Section, schema: z.ZodType<T, string>, fallback: T, meaning: string, docs: Docs<T> = {}): Variable<T> {
  return { schema, fallback, meaning, section, ...docs };
}

/** A variable without a default value: unset is undefined, and `defaultText` says what the service does then. */
export function optional<T>(
  section: Section,
  schema: z.ZodType<T, string>,
  meaning: string,
  docs: Docs<T | undefined>,
): Variable<T | undefined> {
  return { schema, fallback: undefined, meaning, section, ...docs };
}

export type Declaration = Readonly<Record<string, Variable<unknown>>>;
export type Values<D> = { readonly [K in keyof D]: D[K] extends Variable<infer T> ? T : never };
export type Env = Record<string, string | undefined>;

/**
 * Reads every variable of `declaration` from `env`, in declaration order; the first that does not parse, or breaks
 * its production rule, stops the start with a ConfigError naming it. `prefix` reads a family (CWS_NA_ for CWS_<ENV>_).
 */
export function readVariables<D extends Declaration>(env: Env, declaration: D, production: boolean, prefix = ''): Values<D> {
  const values: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(declaration)) {
    const value = readVariable(prefix + name, v, env[prefix + name]);
    const problem = production ? v.productionCheck?.(value) : null;
    if (problem) throw new ConfigError(prefix + name, problem);
    values[name] = value;
  }
  return values as Values<D>;
}

/** One variable's value: its fallback when blank, else what its schema makes of the trimmed text. */
export function readVariable<T>(name: string, v: Variable<T>, raw: string | undefined): T {
  const text = raw?.trim();
  if (!text) return v.fallback;
  const result = v.schema.safeParse(text);
  if (!result.success) throw new ConfigError(name, result.error.issues[0]?.message ?? 'is not valid');
  return result.data;
}
