import { describe, expect, it } from '@jest/globals';
import { hasNulDeep, parseJsonBody, scanJson, urlProblem } from './json-body.js';

describe('parseJsonBody and scanJson', () => {
  it('finds NUL and unpaired surrogates only inside strings, escapes read in pairs', () => {
    expect(scanJson('{"a":"\\u0000"}', 64)).toMatch(/NUL/);
    expect(scanJson('{"a":"\\\\u0000"}', 64)).toBeNull();
    expect(scanJson('{"a":"\\\\\\u0000"}', 64)).toMatch(/NUL/);
    expect(scanJson('["\\ud83d\\ude00"]', 64)).toBeNull();
    expect(scanJson('["\\ud83d"]', 64)).toMatch(/surrogate/);
    expect(scanJson('["\\ude00"]', 64)).toMatch(/surrogate/);
    expect(scanJson('["\\ud83d\\n"]', 64)).toMatch(/surrogate/);
  });

  it('counts depth outside strings only, without recursion', () => {
    expect(scanJson('[[[1]]]', 3)).toBeNull();
    expect(scanJson('[[[[1]]]]', 3)).toMatch(/levels deep/);
    expect(scanJson('["[[[[[[", {"a": "{{{{"}]', 2)).toBeNull();
    expect(scanJson('['.repeat(1_000_000), 64)).toMatch(/levels deep/);
  });

  it('counts the members of each object and the values of the whole body outside strings', () => {
    const members = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":[1,2]`).join(',')}}`;
    expect(scanJson(members(1000), 64)).toBeNull();
    expect(scanJson(members(1001), 64)).toMatch(/more than 1000 members/);
    expect(scanJson(`[${members(600)}, ${members(600)}]`, 64)).toBeNull();
    expect(scanJson('{"a":"::::,,,,"}', 64, 1, 1)).toBeNull();
    expect(scanJson('[1,2,3]', 64, 1000, 3)).toBeNull();
    expect(scanJson('[1,2,3,4]', 64, 1000, 3)).toMatch(/more than 3 values/);
    expect(scanJson('{"a":{"b":1}}', 64, 1000, 2)).toBeNull();
    expect(scanJson('{"a":{"b":1},"c":2}', 64, 1000, 2)).toMatch(/more than 2 values/);
  });

  it('answers {} for an empty body and refuses a primitive at the top', () => {
    expect(parseJsonBody('  ')).toEqual({});
    expect(() => parseJsonBody('"x"')).toThrow(/object or an array/);
    expect(parseJsonBody('{"a":[1,{"b":null}]}')).toEqual({ a: [1, { b: null }] });
  });

  it('finds NUL in keys and values of parsed data', () => {
    expect(hasNulDeep({ a: ['x', { b: 'y\0' }] })).toBe(true);
    expect(hasNulDeep({ 'k\0': 1 })).toBe(true);
    expect(hasNulDeep({ a: ['x'] })).toBe(false);
  });

  it('refuses %00 and bad percent-encoding in the path, and %00 in the query', () => {
    expect(urlProblem('/v1/tenants/acme')).toBeNull();
    expect(urlProblem('/v1/tenants/acme%2500')).toBeNull();
    expect(urlProblem('/v1/tenants/%00')).toMatch(/NUL/);
    expect(urlProblem('/x?a=%00')).toMatch(/NUL/);
    expect(urlProblem('/v1/tenants/%C0%80')).toMatch(/percent-encoded/);
    expect(urlProblem('/x?q=%zz')).toBeNull();
  });
});
