/**
 * A JSON filter over a delivered event body (`{"type", "timestamp", "data"}`), compiled once and evaluated per event.
 *
 * Shape: an object of `"dotted.path": <literal> | {<operators>}` (a literal is an implicit `$eq`; the keys are ANDed)
 * plus `"$and"` / `"$or"`: non-empty arrays of such objects. Operators, as MongoDB reads them:
 *
 * - `$eq` / `$neq`: JSON equality, deep for objects and arrays (object keys in any order, arrays in order; numbers by
 *   value, so 1 and 1.0 are equal; no conversion between types). `$neq` is exactly "not `$eq`", so it matches a
 *   missing path. `$eq: null` matches an explicit null only, not a missing path (unlike MongoDB): ask for a missing
 *   path with `$exists: false`.
 * - `$gt` `$gte` `$lt` `$lte`: the operand is a number or a string; a value compares only with one of the same JSON
 *   type (numbers by value, strings by UTF-16 code units, as JavaScript compares them: ISO-8601 timestamps of one
 *   format compare by time); anything else does not match.
 * - `$in` / `$nin`: an array of at most 100 scalars (string, number, boolean, null); `$in` matches a value equal to
 *   one of them; `$nin` is "not `$in`" and matches a missing path.
 * - `$exists`: true (the path is there, null included) or false (it is not).
 *
 * Arrays (MongoDB's rule, at the end of a path only): when the value at the path is an array, `$eq`, `$gt` `$gte`
 * `$lt` `$lte` and `$in` match if the array itself or any of its elements matches (`{"data.tags": "x"}` matches
 * `["x", "y"]`); `$neq` / `$nin` are their negations (none matches). A path does not go through arrays implicitly:
 * a segment reads an object's own property, or an array's element when it is a canonical index (`data.items.0`).
 * Lookups read own properties only, never the prototype chain.
 *
 * A literal object given as a path's value is an operator object: compare with an object through `$eq`. Bounds:
 * paths are non-empty, with at most 8 non-empty segments, none of `__proto__` `constructor` `prototype` nor starting
 * with `$`; `$and`/`$or` nest at most 8 deep; at most 50 clauses (one per operator of a path, a literal counting as
 * one); strings (paths, object keys and values) at most 1 KiB (UTF-8); literal objects and arrays at most 100
 * entries and 8 levels deep. A bad filter names the failing place, as `filter.$or[1].data.status.$gt`.
 */

import {
  all,
  allChecks,
  any,
  at,
  compareCheck,
  eqCheck,
  inCheck,
  MISSING,
  type Check,
  type Node,
  type Segments,
} from './json-filter-evaluation.js';

export interface JsonFilter {
  /** Whether the body (a parsed JSON value) matches. Never throws, never allocates beyond the minimum. */
  matches(body: unknown): boolean;
}

export type CompiledJsonFilter = { ok: true; filter: JsonFilter } | { ok: false; path: string; message: string };

export const JSON_FILTER_LIMITS = Object.freeze({
  depth: 8,
  clauses: 50,
  stringBytes: 1024,
  listLength: 100,
});

const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'constructor', 'prototype']);
const CANONICAL_INDEX = /^(0|[1-9][0-9]{0,8})$/;

class FilterError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

class Matcher implements JsonFilter {
  constructor(private readonly node: Node) {}

  matches(body: unknown): boolean {
    return this.node(body);
  }
}

/** Compiles a filter (usually parsed JSON); the result holds no reference to the input. */
export function compileJsonFilter(filter: unknown): CompiledJsonFilter {
  try {
    const compiler = new Compiler();
    return { ok: true, filter: new Matcher(compiler.group(filter, 'filter', 0, true)) };
  } catch (e) {
    if (e instanceof FilterError) return { ok: false, path: e.path, message: e.message };
    throw e;
  }
}

class Compiler {
  private clauses = 0;

  /** An object of paths and $and/$or, ANDed. `top`: the filter itself, which may be empty (matches everything). */
  group(value: unknown, where: string, depth: number, top: boolean): Node {
    if (!isPlainObject(value)) throw new FilterError(where, top ? 'a filter is a JSON object' : 'a condition is a JSON object');
    if (depth > JSON_FILTER_LIMITS.depth) throw new FilterError(where, `$and/$or nest more than ${JSON_FILTER_LIMITS.depth} deep`);
    const keys = Object.keys(value);
    if (keys.length === 0 && !top) throw new FilterError(where, 'a condition must not be empty');
    const nodes: Node[] = [];
    for (const key of keys) {
      const here = `${where}.${key}`;
      this.checkString(key, here);
      const operand = value[key];
      if (key === '$and' || key === '$or') {
        if (!Array.isArray(operand) || operand.length === 0) throw new FilterError(here, `${key} takes a non-empty array of conditions`);
        const children = operand.map((child, i) => this.group(child, `${here}[${i}]`, depth + 1, false));
        nodes.push(key === '$and' ? all(children) : any(children));
      } else if (key.startsWith('$')) {
        throw new FilterError(here, `unknown operator ${key} (at this level: a dotted path, $and or $or)`);
      } else {
        nodes.push(this.pathCondition(key, operand, here));
      }
    }
    return all(nodes);
  }

  private pathCondition(path: string, operand: unknown, where: string): Node {
    const segments = this.path(path, where);
    const checks: Check[] = [];
    if (isPlainObject(operand)) {
      const ops = Object.keys(operand);
      if (ops.length === 0) throw new FilterError(where, 'an operator object needs at least one operator (compare with {} through $eq)');
      for (const op of ops) checks.push(this.operator(op, operand[op], `${where}.${op}`));
    } else {
      this.countClause(where);
      checks.push(eqCheck(this.literal(operand, where, 1)));
    }
    return at(segments, checks.length === 1 ? checks[0] : allChecks(checks));
  }

  private path(path: string, where: string): Segments {
    if (path === '') throw new FilterError(where, 'a path must not be empty');
    const names = path.split('.');
    if (names.length > JSON_FILTER_LIMITS.depth) throw new FilterError(where, `a path has at most ${JSON_FILTER_LIMITS.depth} segments`);
    const indexes: number[] = [];
    for (const name of names) {
      if (name === '') throw new FilterError(where, 'a path must not have an empty segment');
      if (FORBIDDEN_SEGMENTS.has(name)) throw new FilterError(where, `a path must not have a ${name} segment`);
      if (name.startsWith('$')) throw new FilterError(where, 'a path segment must not start with $');
      indexes.push(CANONICAL_INDEX.test(name) ? Number(name) : -1);
    }
    return { names, indexes };
  }

  private operator(op: string, operand: unknown, where: string): Check {
    this.checkString(op, where);
    this.countClause(where);
    switch (op) {
      case '$eq':
        return eqCheck(this.literal(operand, where, 1));
      case '$neq': {
        const eq = eqCheck(this.literal(operand, where, 1));
        return (value) => !eq(value);
      }
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        return compareCheck(op, this.comparable(operand, where));
      case '$in':
        return inCheck(this.scalarList(operand, where));
      case '$nin': {
        const inList = inCheck(this.scalarList(operand, where));
        return (value) => !inList(value);
      }
      case '$exists':
        if (typeof operand !== 'boolean') throw new FilterError(where, '$exists takes true or false');
        return operand ? (value) => value !== MISSING : (value) => value === MISSING;
      default:
        throw new FilterError(where, `unknown operator ${op} (one of $eq $neq $gt $gte $lt $lte $in $nin $exists)`);
    }
  }

  private comparable(operand: unknown, where: string): number | string {
    if (typeof operand === 'string') {
      this.checkString(operand, where);
      return operand;
    }
    if (typeof operand === 'number' && Number.isFinite(operand)) return operand;
    throw new FilterError(where, 'a comparison takes a number or a string');
  }

  private scalarList(operand: unknown, where: string): Set<unknown> {
    if (!Array.isArray(operand)) throw new FilterError(where, 'takes an array of strings, numbers, booleans or nulls');
    if (operand.length > JSON_FILTER_LIMITS.listLength)
      throw new FilterError(where, `takes at most ${JSON_FILTER_LIMITS.listLength} values`);
    const set = new Set<unknown>();
    operand.forEach((item: unknown, i) => {
      const here = `${where}[${i}]`;
      if (item !== null && typeof item === 'object') throw new FilterError(here, 'takes strings, numbers, booleans or nulls only');
      set.add(this.literal(item, here, 1));
    });
    return set;
  }

  /** A JSON value, copied (null-prototype objects, frozen) so that the caller's later changes do not reach the filter. */
  private literal(value: unknown, where: string, level: number): unknown {
    switch (typeof value) {
      case 'string':
        this.checkString(value, where);
        return value;
      case 'boolean':
        return value;
      case 'number':
        if (!Number.isFinite(value)) throw new FilterError(where, 'a number must be finite');
        return value;
      case 'object':
        break;
      default:
        throw new FilterError(where, 'not a JSON value');
    }
    if (value === null) return null;
    if (level > JSON_FILTER_LIMITS.depth) throw new FilterError(where, `a value nests more than ${JSON_FILTER_LIMITS.depth} deep`);
    if (Array.isArray(value)) {
      if (value.length > JSON_FILTER_LIMITS.listLength)
        throw new FilterError(where, `an array holds at most ${JSON_FILTER_LIMITS.listLength} values`);
      return Object.freeze(value.map((item: unknown, i) => this.literal(item, `${where}[${i}]`, level + 1)));
    }
    if (!isPlainObject(value)) throw new FilterError(where, 'not a JSON value');
    const keys = Object.keys(value);
    if (keys.length > JSON_FILTER_LIMITS.listLength)
      throw new FilterError(where, `an object holds at most ${JSON_FILTER_LIMITS.listLength} keys`);
    const copy = Object.create(null) as Record<string, unknown>;
    for (const key of keys) {
      this.checkString(key, `${where}.${key}`);
      copy[key] = this.literal(value[key], `${where}.${key}`, level + 1);
    }
    return Object.freeze(copy);
  }

  private checkString(value: string, where: string): void {
    // A UTF-8 byte is at most one UTF-16 unit, and a unit at most 3 bytes: measure only when it may be over.
    if (value.length * 3 > JSON_FILTER_LIMITS.stringBytes && Buffer.byteLength(value, 'utf8') > JSON_FILTER_LIMITS.stringBytes)
      throw new FilterError(
        where.length > 200 ? `${where.slice(0, 200)}...` : where,
        `a string is longer than ${JSON_FILTER_LIMITS.stringBytes} bytes`,
      );
  }

  private countClause(where: string): void {
    if (++this.clauses > JSON_FILTER_LIMITS.clauses)
      throw new FilterError(where, `a filter has at most ${JSON_FILTER_LIMITS.clauses} clauses`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}
