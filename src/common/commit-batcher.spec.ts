import { describe, expect, it } from '@jest/globals';
import { CommitBatcher } from './commit-batcher.js';

describe('CommitBatcher', () => {
  it('writes a lone item at once and groups the items that arrive during a write', async () => {
    const writes: string[][] = [];
    let release: () => void = () => undefined;
    const batcher = new CommitBatcher<{ id: string }>(async (items) => {
      writes.push(items.map((i) => i.id));
      if (writes.length === 1) await new Promise<void>((r) => (release = r));
      return new Set(items.filter((i) => i.id !== 'c').map((i) => i.id));
    });
    const first = batcher.save({ id: 'a' });
    const later = [batcher.save({ id: 'b' }), batcher.save({ id: 'c' }), batcher.save({ id: 'd' })];
    expect(writes).toEqual([['a']]);
    release();
    expect(await first).toBe(true);
    expect(await Promise.all(later)).toEqual([true, false, true]);
    expect(writes).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('rejects every item of a failed statement and keeps going', async () => {
    let fail = true;
    const batcher = new CommitBatcher<{ id: string }>(async (items) => {
      if (fail) {
        fail = false;
        throw new Error('connection reset');
      }
      return new Set(items.map((i) => i.id));
    }, 2);
    await expect(batcher.save({ id: 'x' })).rejects.toThrow('connection reset');
    expect(await batcher.save({ id: 'y' })).toBe(true);
  });

  it('splits a backlog into statements of at most maxBatch rows', async () => {
    const sizes: number[] = [];
    const batcher = new CommitBatcher<{ id: string }>(async (items) => {
      sizes.push(items.length);
      await Promise.resolve();
      return new Set(items.map((i) => i.id));
    }, 3);
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => batcher.save({ id: `r${i}` })));
    expect(all.every(Boolean)).toBe(true);
    expect(sizes).toEqual([1, 3, 3, 1]);
  });
});
