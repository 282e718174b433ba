// The evaluation half of src/common/json-filter.ts (whose comment is the language's reference): the checks a compiled
// filter is made of, run once per delivered event. They validate nothing: the compiler has checked every operand
// and copied and bounded every literal, so a literal's depth bounds jsonEqual's recursion. The compiler changes
// with the language's rules and bounds; this file with how fast an event is matched (bench/json-filter.ts).

export type Check = (value: unknown) => boolean;
export type Node = (body: unknown) => boolean;

/** What a path resolves to when the body has nothing there (`$exists: false`, `$neq` and `$nin` match it). */
export const MISSING: unique symbol = Symbol('missing');
const { hasOwn } = Object;

export interface Segments {
  readonly names: readonly string[];
  /** The segment as an array index, or -1 when it is not a canonical one. */
  readonly indexes: readonly number[];
}

/** The value at the path (own properties and array elements only), or MISSING. */
function resolve(body: unknown, { names, indexes }: Segments): unknown {
  let value = body;
  for (let i = 0; i < names.length; i++) {
    if (typeof value !== 'object' || value === null) return MISSING;
    if (Array.isArray(value)) {
      const index = indexes[i];
      if (index < 0 || index >= value.length) return MISSING;
      value = value[index];
    } else {
      const name = names[i];
      if (!hasOwn(value, name)) return MISSING;
      value = (value as Record<string, unknown>)[name];
    }
  }
  return value;
}

export function at(segments: Segments, check: Check): Node {
  return (body) => check(resolve(body, segments));
}

export function all(nodes: Node[]): Node {
  if (nodes.length === 1) return nodes[0];
  return (body) => {
    for (let i = 0; i < nodes.length; i++) if (!nodes[i](body)) return false;
    return true;
  };
}

export function any(nodes: Node[]): Node {
  if (nodes.length === 1) return nodes[0];
  return (body) => {
    for (let i = 0; i < nodes.length; i++) if (nodes[i](body)) return true;
    return false;
  };
}

export function allChecks(checks: Check[]): Check {
  return (value) => {
    for (let i = 0; i < checks.length; i++) if (!checks[i](value)) return false;
    return true;
  };
}

export function eqCheck(operand: unknown): Check {
  if (operand === null || typeof operand !== 'object') {
    // A scalar: strict equality (no conversion; 0 and -0 are equal, as JSON has no -0 of its own).
    return (value) => {
      if (value === operand) return true;
      if (!Array.isArray(value)) return false;
      for (let i = 0; i < value.length; i++) if (value[i] === operand) return true;
      return false;
    };
  }
  return (value) => {
    if (jsonEqual(value, operand)) return true;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (jsonEqual(value[i], operand)) return true;
    return false;
  };
}

export function compareCheck(op: '$gt' | '$gte' | '$lt' | '$lte', operand: number | string): Check {
  const kind = typeof operand;
  let test: (v: unknown) => boolean;
  switch (op) {
    case '$gt':
      test = (v) => typeof v === kind && (v as number | string) > operand;
      break;
    case '$gte':
      test = (v) => typeof v === kind && (v as number | string) >= operand;
      break;
    case '$lt':
      test = (v) => typeof v === kind && (v as number | string) < operand;
      break;
    case '$lte':
      test = (v) => typeof v === kind && (v as number | string) <= operand;
      break;
  }
  return (value) => {
    if (test(value)) return true;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (test(value[i])) return true;
    return false;
  };
}

export function inCheck(values: Set<unknown>): Check {
  return (value) => {
    if (value === MISSING) return false;
    if (values.has(value)) return true;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (values.has(value[i])) return true;
    return false;
  };
}

/** Equality of a JSON value with a compiled literal (whose depth bounds the recursion); own keys only. */
function jsonEqual(value: unknown, literal: unknown): boolean {
  if (value === literal) return true;
  if (typeof value !== 'object' || value === null || typeof literal !== 'object' || literal === null) return false;
  const isArray = Array.isArray(literal);
  if (Array.isArray(value) !== isArray) return false;
  if (isArray) {
    const list = literal as readonly unknown[];
    const other = value as readonly unknown[];
    if (other.length !== list.length) return false;
    for (let i = 0; i < list.length; i++) if (!jsonEqual(other[i], list[i])) return false;
    return true;
  }
  const object = value as Record<string, unknown>;
  const expected = literal as Record<string, unknown>;
  let count = 0;
  for (const key in expected) {
    count++;
    if (!hasOwn(object, key) || !jsonEqual(object[key], expected[key])) return false;
  }
  for (const key in object) if (hasOwn(object, key) && --count < 0) return false;
  return count === 0;
}
