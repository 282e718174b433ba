import { describe, expect, it } from '@jest/globals';
import { compileJsonFilter, type JsonFilter } from './json-filter.js';

function compiled(filter: unknown): JsonFilter {
  const result = compileJsonFilter(filter);
  if (!result.ok) throw new Error(`${result.path}: ${result.message}`);
  return result.filter;
}

function refusal(filter: unknown): { path: string; message: string } {
  const result = compileJsonFilter(filter);
  if (result.ok) throw new Error(`compiled ${JSON.stringify(filter)}`);
  return { path: result.path, message: result.message };
}

const event = (data: unknown, type = 'workflow.step_changed') => ({ type, timestamp: '2026-11-29T01:00:00.000Z', data });

describe('compileJsonFilter: matching', () => {
  it('reads dotted paths; a literal is an implicit $eq; keys are ANDed', () => {
    const f = compiled({ type: 'workflow.step_changed', 'data.transition': 'Sign' });
    expect(f.matches(event({ transition: 'Sign' }))).toBe(true);
    expect(f.matches(event({ transition: 'Review' }))).toBe(false);
    expect(f.matches(event({ transition: 'Sign' }, 'other'))).toBe(false);
    expect(f.matches(event({}))).toBe(false);
    expect(compiled({}).matches(event({}))).toBe(true);
  });

  it('compares only values of the same JSON type: no conversion', () => {
    const cases: Array<[unknown, unknown, boolean]> = [
      [{ 'data.n': 1 }, { n: 1 }, true],
      [{ 'data.n': 1 }, { n: 1.0 }, true],
      [{ 'data.n': 1 }, { n: '1' }, false],
      [{ 'data.n': 1 }, { n: true }, false],
      [{ 'data.n': 0 }, { n: false }, false],
      [{ 'data.n': '' }, { n: null }, false],
      [{ 'data.n': { $gt: 5 } }, { n: 6 }, true],
      [{ 'data.n': { $gt: 5 } }, { n: 5 }, false],
      [{ 'data.n': { $gt: 5 } }, { n: '6' }, false],
      [{ 'data.n': { $gte: 5 } }, { n: 5 }, true],
      [{ 'data.n': { $lt: 5 } }, { n: 4.5 }, true],
      [{ 'data.n': { $lt: 5 } }, { n: null }, false],
      [{ 'data.n': { $lte: 5 } }, { n: 5 }, true],
      [{ 'data.n': { $lte: 5 } }, { n: 6 }, false],
      [{ 'data.s': { $gt: 'b' } }, { s: 'c' }, true],
      [{ 'data.s': { $gt: 'b' } }, { s: 'B' }, false],
      [{ 'data.s': { $gt: 'b' } }, { s: 3 }, false],
      [{ 'data.s': { $lt: '10' } }, { s: '9' }, false],
      [{ timestamp: { $gte: '2026-11-29T00:00:00.000Z', $lt: '2026-11-30T00:00:00.000Z' } }, {}, true],
      [{ timestamp: { $gt: '2026-11-29T01:00:00.000Z' } }, {}, false],
      [{ 'data.b': { $gt: false } }, { b: true }, false],
    ];
    for (const [filter, data, expected] of cases) {
      expect([filter, data, compileJsonFilter(filter).ok && compiled(filter).matches(event(data))]).toEqual([filter, data, expected]);
    }
  });

  it('$eq and $neq compare objects and arrays deeply (keys in any order); $neq matches a missing path', () => {
    const eq = compiled({ 'data.meta': { $eq: { a: 1, b: [1, { c: null }] } } });
    expect(eq.matches(event({ meta: { b: [1, { c: null }], a: 1 } }))).toBe(true);
    expect(eq.matches(event({ meta: { a: 1, b: [1, { c: null }], d: 0 } }))).toBe(false);
    expect(eq.matches(event({ meta: { a: 1, b: [{ c: null }, 1] } }))).toBe(false);
    expect(eq.matches(event({ meta: { a: 1 } }))).toBe(false);
    expect(eq.matches(event({ meta: { a: '1', b: [1, { c: null }] } }))).toBe(false);
    expect(eq.matches(event({}))).toBe(false);
    const empty = compiled({ 'data.meta': { $eq: {} } });
    expect([empty.matches(event({ meta: {} })), empty.matches(event({ meta: { a: 1 } })), empty.matches(event({ meta: [] }))]).toEqual([
      true,
      false,
      false,
    ]);
    const neq = compiled({ 'data.status': { $neq: 'done' } });
    expect([neq.matches(event({ status: 'open' })), neq.matches(event({ status: 'done' })), neq.matches(event({}))]).toEqual([
      true,
      false,
      true,
    ]);
    const neqObject = compiled({ 'data.meta': { $neq: { a: 1 } } });
    expect([
      neqObject.matches(event({ meta: { a: 1 } })),
      neqObject.matches(event({ meta: { a: 2 } })),
      neqObject.matches(event({})),
    ]).toEqual([false, true, true]);
  });

  it('$eq null matches an explicit null only; $exists tells present from missing', () => {
    const isNull = compiled({ 'data.x': null });
    expect([isNull.matches(event({ x: null })), isNull.matches(event({})), isNull.matches(event({ x: 0 }))]).toEqual([true, false, false]);
    const there = compiled({ 'data.x': { $exists: true } });
    const absent = compiled({ 'data.x': { $exists: false } });
    for (const [data, present] of [
      [{ x: null }, true],
      [{ x: false }, true],
      [{}, false],
      [null, false],
      ['x', false],
    ] as Array<[unknown, boolean]>) {
      expect([data, there.matches(event(data)), absent.matches(event(data))]).toEqual([data, present, !present]);
    }
  });

  it('$in and $nin take scalars; $nin matches a missing path', () => {
    const inList = compiled({ 'data.transition': { $in: ['Sign', 'Archive', null, 3] } });
    expect(
      ['Sign', 'Archive', null, 3, 'Review', '3', undefined].map((t) => inList.matches(event(t === undefined ? {} : { transition: t }))),
    ).toEqual([true, true, true, true, false, false, false]);
    const nin = compiled({ 'data.transition': { $nin: ['Sign'] } });
    expect([nin.matches(event({ transition: 'Sign' })), nin.matches(event({ transition: 'Review' })), nin.matches(event({}))]).toEqual([
      false,
      true,
      true,
    ]);
    expect(compiled({ 'data.t': { $in: [] } }).matches(event({ t: 1 }))).toBe(false);
    expect(compiled({ 'data.t': { $nin: [] } }).matches(event({ t: 1 }))).toBe(true);
  });

  it('applies MongoDB’s array rule at the end of a path: the array itself or any element', () => {
    const body = event({ tags: ['urgent', 'legal'], scores: [3, 9], pairs: [[1, 2], [3]] });
    const m = (filter: unknown) => compiled(filter).matches(body);
    expect(m({ 'data.tags': 'legal' })).toBe(true);
    expect(m({ 'data.tags': 'other' })).toBe(false);
    expect(m({ 'data.tags': { $eq: ['urgent', 'legal'] } })).toBe(true);
    expect(m({ 'data.tags': { $eq: ['legal', 'urgent'] } })).toBe(false);
    expect(m({ 'data.pairs': { $eq: [3] } })).toBe(true);
    expect(m({ 'data.tags': { $neq: 'legal' } })).toBe(false);
    expect(m({ 'data.tags': { $neq: 'other' } })).toBe(true);
    expect(m({ 'data.scores': { $gt: 8 } })).toBe(true);
    expect(m({ 'data.scores': { $gt: 9 } })).toBe(false);
    // Each operator on its own: 3 is < 5 and 9 is > 8 (MongoDB reads it so too).
    expect(m({ 'data.scores': { $gt: 8, $lt: 5 } })).toBe(true);
    expect(m({ 'data.tags': { $in: ['x', 'legal'] } })).toBe(true);
    expect(m({ 'data.tags': { $nin: ['x', 'legal'] } })).toBe(false);
    expect(m({ 'data.tags': { $nin: ['x'] } })).toBe(true);
    // Indexes are read when canonical; no implicit traversal through an array in the middle of a path.
    expect(m({ 'data.tags.1': 'legal' })).toBe(true);
    expect(m({ 'data.tags.01': 'legal' })).toBe(false);
    expect(m({ 'data.tags.2': { $exists: false } })).toBe(true);
    expect(m({ 'data.tags.length': { $exists: true } })).toBe(false);
    expect(compiled({ 'data.items.name': 'a' }).matches(event({ items: [{ name: 'a' }] }))).toBe(false);
  });

  it('$and and $or combine conditions, nested', () => {
    const f = compiled({
      type: 'workflow.step_changed',
      $or: [{ 'data.transition': 'Sign' }, { $and: [{ 'data.transition': 'Review' }, { 'data.priority': { $gte: 2 } }] }],
    });
    expect(f.matches(event({ transition: 'Sign' }))).toBe(true);
    expect(f.matches(event({ transition: 'Review', priority: 2 }))).toBe(true);
    expect(f.matches(event({ transition: 'Review', priority: 1 }))).toBe(false);
    expect(f.matches(event({ transition: 'Create', priority: 5 }))).toBe(false);
    expect(f.matches(event({ transition: 'Sign' }, 'x'))).toBe(false);
  });

  it('never reads the prototype chain and never throws on any body', () => {
    const f = compiled({ 'data.toString': { $exists: true } });
    expect(f.matches(event({}))).toBe(false);
    const g = compiled({ 'data.hasOwnProperty': { $exists: false }, 'data.valueOf.x': { $exists: false } });
    expect(g.matches(event({}))).toBe(true);
    const inherited = Object.create({ transition: 'Sign' }) as object;
    expect(compiled({ 'data.transition': 'Sign' }).matches(event(inherited))).toBe(false);
    const own = JSON.parse('{"data": {"__proto__": {"x": 1}}}') as unknown;
    expect(compiled({ 'data.x': { $exists: true } }).matches(own)).toBe(false);
    const h = compiled({ 'data.a.b': { $in: [1] }, 'data.c': { $eq: { d: 1 } } });
    for (const body of [undefined, null, 1, 'x', [], [1], { data: null }, { data: [] }, { data: 'str' }, { data: { a: [] } }]) {
      expect(h.matches(body)).toBe(false);
    }
  });

  it('does not depend on the input after compiling', () => {
    const filter = { 'data.meta': { $eq: { a: [1] } }, 'data.t': { $in: ['x'] } };
    const f = compiled(filter);
    filter['data.meta'].$eq.a.push(2);
    filter['data.t'].$in.push('y');
    expect(f.matches(event({ meta: { a: [1] }, t: 'x' }))).toBe(true);
    expect(f.matches(event({ meta: { a: [1] }, t: 'y' }))).toBe(false);
  });
});

describe('compileJsonFilter: refusals name the failing place', () => {
  const long = 'x'.repeat(1025);
  const cases: Array<[string, unknown, string, RegExp]> = [
    ['a non-object filter', [], 'filter', /JSON object/],
    ['null', null, 'filter', /JSON object/],
    ['a string', 'type', 'filter', /JSON object/],
    ['an unknown top-level operator', { $nor: [] }, 'filter.$nor', /unknown operator/],
    ['an unknown operator', { 'data.x': { $regex: 'a' } }, 'filter.data.x.$regex', /unknown operator/],
    ['a forgotten $', { 'data.x': { gt: 1 } }, 'filter.data.x.gt', /unknown operator/],
    ['an empty operator object', { 'data.x': {} }, 'filter.data.x', /at least one operator/],
    ['an empty path', { '': 1 }, 'filter.', /empty/],
    ['an empty segment', { 'data..x': 1 }, 'filter.data..x', /empty segment/],
    ['a leading dot', { '.data': 1 }, 'filter..data', /empty segment/],
    ['a trailing dot', { 'data.': 1 }, 'filter.data.', /empty segment/],
    ['__proto__', JSON.parse('{"data.__proto__.x": 1}') as unknown, 'filter.data.__proto__.x', /__proto__/],
    ['constructor', { 'data.constructor': 1 }, 'filter.data.constructor', /constructor/],
    ['prototype', { 'prototype.x': 1 }, 'filter.prototype.x', /prototype/],
    ['a $ segment', { 'data.$x': 1 }, 'filter.data.$x', /\$/],
    ['a path of 9 segments', { 'a.b.c.d.e.f.g.h.i': 1 }, 'filter.a.b.c.d.e.f.g.h.i', /8 segments/],
    [
      'a comparison with a boolean',
      { $or: [{ a: 1 }, { 'data.status': { $gt: true } }] },
      'filter.$or[1].data.status.$gt',
      /number or a string/,
    ],
    ['a comparison with an object', { 'data.n': { $lt: {} } }, 'filter.data.n.$lt', /number or a string/],
    ['$in not an array', { 'data.n': { $in: 'a' } }, 'filter.data.n.$in', /array/],
    ['$in with an object', { 'data.n': { $nin: [1, { a: 1 }] } }, 'filter.data.n.$nin[1]', /scalars|strings, numbers/],
    ['$in over 100', { 'data.n': { $in: Array.from({ length: 101 }, (_, i) => i) } }, 'filter.data.n.$in', /at most 100/],
    ['$exists not boolean', { 'data.n': { $exists: 1 } }, 'filter.data.n.$exists', /true or false/],
    ['$and not an array', { $and: { a: 1 } }, 'filter.$and', /non-empty array/],
    ['$or empty', { $or: [] }, 'filter.$or', /non-empty array/],
    ['an empty condition', { $or: [{ a: 1 }, {}] }, 'filter.$or[1]', /empty/],
    ['a condition not an object', { $and: [{ a: 1 }, 3] }, 'filter.$and[1]', /JSON object/],
    ['a long path', { [long]: 1 }, `filter.${long}`.slice(0, 200) + '...', /1024 bytes/],
    ['a long value', { 'data.s': { $eq: long } }, 'filter.data.s.$eq', /1024 bytes/],
    ['a long multi-byte value', { 'data.s': 'é'.repeat(513) }, 'filter.data.s', /1024 bytes/],
    ['a long $in value', { 'data.s': { $in: ['a', long] } }, 'filter.data.s.$in[1]', /1024 bytes/],
    ['a long key in a literal', { 'data.s': { $eq: { [long]: 1 } } }, `filter.data.s.$eq.${long}`.slice(0, 200) + '...', /1024 bytes/],
    ['a non-finite number', { 'data.n': Number.NaN }, 'filter.data.n', /finite/],
    ['a non-JSON value', { 'data.n': { $eq: new Date(0) } }, 'filter.data.n.$eq', /JSON value/],
    ['undefined', { 'data.n': undefined }, 'filter.data.n', /JSON value/],
    ['a literal over 100 entries', { 'data.n': Array.from({ length: 101 }, () => 0) }, 'filter.data.n', /at most 100/],
    ['a literal nested 9 deep', { 'data.n': { $eq: [[[[[[[[[1]]]]]]]]] } }, 'filter.data.n.$eq[0][0][0][0][0][0][0][0]', /8 deep/],
  ];
  it.each(cases)('refuses %s', (_name, filter, path, message) => {
    const refused = refusal(filter);
    expect(refused.path).toBe(path);
    expect(refused.message).toMatch(message);
  });

  it('refuses more than 50 clauses, counting each operator of a path and each literal', () => {
    const fifty = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`data.k${i}`, { $gte: 0, $lte: 9 }]));
    expect(compileJsonFilter(fifty).ok).toBe(true);
    expect(refusal({ ...fifty, 'data.extra': 1 })).toEqual({ path: 'filter.data.extra', message: 'a filter has at most 50 clauses' });
    const inOr = { $or: Array.from({ length: 51 }, (_, i) => ({ [`data.k${i}`]: i })) };
    expect(refusal(inOr).path).toBe('filter.$or[50].data.k50');
  });

  it('refuses $and/$or nested more than 8 deep', () => {
    const nest = (levels: number): unknown => (levels === 0 ? { a: 1 } : { $and: [nest(levels - 1)] });
    expect(compileJsonFilter(nest(8)).ok).toBe(true);
    const refused = refusal(nest(9));
    expect(refused.path).toBe(`filter${'.$and[0]'.repeat(9)}`);
    expect(refused.message).toMatch(/8 deep/);
  });
});
