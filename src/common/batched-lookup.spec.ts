import { describe, expect, it } from '@jest/globals';
import { BatchedLookup } from './batched-lookup.js';

function recorder(fail: (keys: string[]) => boolean = () => false) {
  const queries: string[][] = [];
  const lookup = new BatchedLookup<string, string>(async (keys) => {
    queries.push(keys);
    await new Promise((r) => setTimeout(r, 5));
    if (fail(keys)) throw new Error('refused');
    return new Map(keys.filter((k) => k.startsWith('good')).map((k) => [k, `value of ${k}`]));
  }, 3);
  return { queries, lookup };
}

describe('BatchedLookup', () => {
  it('starts a lone lookup at once and answers found and not found', async () => {
    const { queries, lookup } = recorder();
    const good = lookup.get('good-1');
    expect(queries).toEqual([['good-1']]);
    expect(await good).toBe('value of good-1');
    expect(await lookup.get('bad-1')).toBeUndefined();
  });

  it('gathers the lookups that arrive meanwhile, once per key, at most maxBatch keys a query', async () => {
    const { queries, lookup } = recorder();
    const first = lookup.get('good-0');
    const rest = ['good-1', 'bad-1', 'good-1', 'bad-2', 'good-3', 'bad-1'].map((k) => lookup.get(k));
    const answers = await Promise.all([first, ...rest]);
    expect(answers).toEqual(['value of good-0', 'value of good-1', undefined, 'value of good-1', undefined, 'value of good-3', undefined]);
    expect(queries).toEqual([['good-0'], ['good-1', 'bad-1', 'bad-2'], ['good-3']]);
  });

  it('fails the lookups of a query that fails (the database, not a key: a SELECT refuses no key), then goes on', async () => {
    let n = 0;
    const { lookup } = recorder(() => ++n === 2);
    const first = lookup.get('good-0');
    const carried = [lookup.get('good-1'), lookup.get('bad-1')];
    await expect(first).resolves.toBe('value of good-0');
    for (const c of carried) await expect(c).rejects.toThrow('refused');
    await expect(lookup.get('good-2')).resolves.toBe('value of good-2');
  });
});
