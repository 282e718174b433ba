import { describe, expect, it } from '@jest/globals';
import { CommitBatcher } from './commit-batcher.js';

describe('CommitBatcher', () => {
  it('writes a lone item at once and groups the items that arrive during a write', async () => {
    const writes: string[][] = [];
    let release: () => void = () => undefined;
    const batcher = new CommitBatcher<{ id: string }, string>(async (items) => {
      writes.push(items.map((i) => i.id));
      if (writes.length === 1) await new Promise<void>((r) => (release = r));
      return new Map(items.filter((i) => i.id !== 'c').map((i) => [i.id, `saved ${i.id}`]));
    });
    const first = batcher.save({ id: 'a' });
    const later = [batcher.save({ id: 'b' }), batcher.save({ id: 'c' }), batcher.save({ id: 'd' })];
    expect(writes).toEqual([['a']]);
    release();
    expect(await first).toBe('saved a');
    expect(await Promise.all(later)).toEqual(['saved b', null, 'saved d']);
    expect(writes).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('rejects every item of a failed statement and keeps going', async () => {
    let fail = true;
    const batcher = new CommitBatcher<{ id: string }, string>(async (items) => {
      if (fail) {
        fail = false;
        throw new Error('connection reset');
      }
      return new Map(items.map((i) => [i.id, i.id]));
    }, 2);
    await expect(batcher.save({ id: 'x' })).rejects.toThrow('connection reset');
    expect(await batcher.save({ id: 'y' })).toBe('y');
  });
});
