/**
 * An endpoint's filter over the delivered body `{type, timestamp, data}` (docs/endpoints.md, "Filters"): MongoDB's
 * reading of `$eq $neq $gt $gte $lt $lte $in $nin $exists $and $or`, dotted paths, `$neq`/`$nin` matching a missing
 * path. Compiled once when the endpoint is written (a bad filter is `400 validation_failed` naming its path).
 */
export interface EndpointFilter {
  matches(body: unknown): boolean;
}

export type CompiledFilter = { ok: true; filter: EndpointFilter } | { ok: false; path: string; message: string };

type Test = (body: unknown) => boolean;

const MAX_DEPTH = 8;
const MAX_NODES = 200;
const COMPARE = new Set(['$eq', '$neq', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists']);

export function compileEndpointFilter(filter: unknown): CompiledFilter {
  const nodes = { n: 0 };
  try {
    const test = compileDocument(filter, '', 0, nodes);
    return { ok: true, filter: { matches: test } };
  } catch (e) {
    if (e instanceof FilterProblem) return { ok: false, path: e.path || '(root)', message: e.message };
    throw e;
  }
}

class FilterProblem extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function at(base: string, key: string): string {
  return base ? `${base}.${key}` : key;
}

function compileDocument(doc: unknown, where: string, depth: number, nodes: { n: number }): Test {
  if (depth > MAX_DEPTH) throw new FilterProblem(where, `nested deeper than ${MAX_DEPTH}`);
  if (!isPlainObject(doc)) throw new FilterProblem(where, 'a filter is a JSON object');
  const tests: Test[] = [];
  for (const [key, value] of Object.entries(doc)) {
    if (++nodes.n > MAX_NODES) throw new FilterProblem(where, `more than ${MAX_NODES} clauses`);
    const here = at(where, key);
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(value) || value.length === 0) throw new FilterProblem(here, `${key} takes a non-empty array of filters`);
      const parts = value.map((v, i) => compileDocument(v, `${here}.${i}`, depth + 1, nodes));
      tests.push(key === '$and' ? (b) => parts.every((p) => p(b)) : (b) => parts.some((p) => p(b)));
      continue;
    }
    if (key.startsWith('$')) throw new FilterProblem(here, `unknown operator ${key}`);
    if (key === '' || key.split('.').some((s) => s === '')) throw new FilterProblem(here, 'an empty path segment');
    const path = key.split('.');
    tests.push(compileField(path, value, here));
  }
  return (b) => tests.every((t) => t(b));
}

function compileField(path: string[], cond: unknown, where: string): Test {
  const read = (b: unknown): { found: boolean; value: unknown } => {
    let cur: unknown = b;
    for (const seg of path) {
      if (!isPlainObject(cur) || !Object.prototype.hasOwnProperty.call(cur, seg)) return { found: false, value: undefined };
      cur = cur[seg];
    }
    return { found: true, value: cur };
  };
  if (!isPlainObject(cond) || !Object.keys(cond).some((k) => k.startsWith('$'))) {
    checkScalar(cond, where);
    return (b) => {
      const r = read(b);
      return r.found && equal(r.value, cond);
    };
  }
  const tests: Test[] = [];
  for (const [op, operand] of Object.entries(cond)) {
    const here = at(where, op);
    if (!COMPARE.has(op)) throw new FilterProblem(here, `unknown operator ${op}`);
    switch (op) {
      case '$eq':
      case '$neq': {
        checkScalar(operand, here);
        const eq = (b: unknown) => {
          const r = read(b);
          return r.found && equal(r.value, operand);
        };
        tests.push(op === '$eq' ? eq : (b) => !eq(b));
        break;
      }
      case '$in':
      case '$nin': {
        if (!Array.isArray(operand)) throw new FilterProblem(here, `${op} takes an array`);
        operand.forEach((v, i) => checkScalar(v, `${here}.${i}`));
        const inList = (b: unknown) => {
          const r = read(b);
          return r.found && operand.some((v) => equal(r.value, v));
        };
        tests.push(op === '$in' ? inList : (b) => !inList(b));
        break;
      }
      case '$exists': {
        if (typeof operand !== 'boolean') throw new FilterProblem(here, '$exists takes true or false');
        tests.push((b) => read(b).found === operand);
        break;
      }
      default: {
        if (typeof operand !== 'number' && typeof operand !== 'string') throw new FilterProblem(here, `${op} takes a number or a string`);
        tests.push((b) => {
          const r = read(b);
          if (!r.found || typeof r.value !== typeof operand) return false;
          const v = r.value as number | string;
          return op === '$gt' ? v > operand : op === '$gte' ? v >= operand : op === '$lt' ? v < operand : v <= operand;
        });
      }
    }
  }
  return (b) => tests.every((t) => t(b));
}

function checkScalar(v: unknown, where: string): void {
  if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) return;
  throw new FilterProblem(where, 'compares with a string, a number, a boolean or null');
}

function equal(a: unknown, b: unknown): boolean {
  return a === b;
}
