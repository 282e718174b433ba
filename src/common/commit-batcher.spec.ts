import { describe, expect, it } from '@jest/globals';
import { CommitBatcher, statementRefused } from './commit-batcher.js';

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

  it('rejects every item of a group whose connection failed, without retrying, and keeps going', async () => {
    const writes: string[][] = [];
    let fail = true;
    let release: () => void = () => undefined;
    const batcher = new CommitBatcher<{ id: string }>(async (items) => {
      writes.push(items.map((i) => i.id));
      if (writes.length === 1) {
        await new Promise<void>((r) => (release = r));
        return new Set(items.map((i) => i.id));
      }
      if (fail) {
        fail = false;
        throw new Error('connection reset');
      }
      return new Set(items.map((i) => i.id));
    });
    const first = batcher.save({ id: 'w' });
    const group = [batcher.save({ id: 'x1' }), batcher.save({ id: 'x2' }), batcher.save({ id: 'x3' })];
    release();
    expect(await first).toBe(true);
    for (const p of group) await expect(p).rejects.toThrow('connection reset');
    expect(writes).toEqual([['w'], ['x1', 'x2', 'x3']]);
    expect(await batcher.save({ id: 'y' })).toBe(true);
  });

  it('a member the database refuses fails alone: the group is split until it is isolated', async () => {
    const writes: string[][] = [];
    let release: () => void = () => undefined;
    const refused = Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });
    const batcher = new CommitBatcher<{ id: string }>(async (items) => {
      writes.push(items.map((i) => i.id));
      if (writes.length === 1) await new Promise<void>((r) => (release = r));
      if (items.some((i) => i.id.startsWith('bad'))) throw refused;
      return new Set(items.filter((i) => i.id !== 'gone').map((i) => i.id));
    });
    const first = batcher.save({ id: 'lead' });
    const ids = ['a', 'b', 'bad1', 'c', 'gone', 'd', 'e', 'bad2', 'f'];
    const outcomes = ids.map((id) =>
      batcher.save({ id }).then(
        (saved) => (saved ? 'saved' : 'not saved'),
        (e: Error) => `refused: ${e.message}`,
      ),
    );
    release();
    await first;
    const answered = await Promise.all(outcomes);
    expect(Object.fromEntries(ids.map((id, i) => [id, answered[i]]))).toEqual({
      a: 'saved',
      b: 'saved',
      bad1: 'refused: unsupported Unicode escape sequence',
      c: 'saved',
      gone: 'not saved',
      d: 'saved',
      e: 'saved',
      bad2: 'refused: unsupported Unicode escape sequence',
      f: 'saved',
    });
    // Every good member was written in a statement that succeeded, the bad ones alone.
    expect(writes.filter((w) => w.length === 1 && w[0].startsWith('bad'))).toEqual([['bad1'], ['bad2']]);
    expect(writes.length).toBeLessThan(2 + 2 * 2 * Math.ceil(Math.log2(ids.length)));
  });

  it('tells a refused statement from a lost connection', () => {
    expect(statementRefused(Object.assign(new Error('x'), { code: '22P05' }))).toBe(true);
    expect(statementRefused(Object.assign(new Error('x'), { code: '23505' }))).toBe(true);
    expect(statementRefused(Object.assign(new Error('x'), { code: '08006' }))).toBe(false);
    expect(statementRefused(Object.assign(new Error('x'), { code: '57P01' }))).toBe(false);
    expect(statementRefused(Object.assign(new Error('x'), { code: 'ECONNRESET' }))).toBe(false);
    expect(statementRefused(new Error('x'))).toBe(false);
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

  it('with maxInFlight 2 overlaps a second group once it is as large as the one started last, and answers each as its own commits', async () => {
    const writes: string[][] = [];
    const releases = new Map<string, () => void>();
    let open = 0;
    let mostOpen = 0;
    const batcher = new CommitBatcher<{ id: string }>(
      async (items) => {
        const ids = items.map((i) => i.id);
        writes.push(ids);
        open++;
        mostOpen = Math.max(mostOpen, open);
        await new Promise<void>((r) => releases.set(ids.join(), r));
        open--;
        return new Set(ids);
      },
      250,
      statementRefused,
      2,
    );
    const answered: string[] = [];
    const save = (id: string) => batcher.save({ id }).then(() => answered.push(id));
    const tick = () => new Promise((r) => setImmediate(r));
    const saves = [save('a'), save('b'), save('c'), save('d')];
    // 'a' starts alone; 'b' is as large as it and overlaps; 'c' and 'd' wait for a free lane.
    expect(writes).toEqual([['a'], ['b']]);
    releases.get('b')!(); // the second group commits first: its member is answered without waiting for the first
    await tick();
    expect(answered).toEqual(['b']);
    expect(writes).toEqual([['a'], ['b'], ['c', 'd']]);
    // 'e' alone would overlap a group of two: it waits until no group is in flight.
    saves.push(save('e'));
    releases.get('a')!();
    await tick();
    expect(writes).toEqual([['a'], ['b'], ['c', 'd']]);
    saves.push(save('f'));
    await tick();
    expect(writes).toEqual([['a'], ['b'], ['c', 'd'], ['e', 'f']]);
    releases.get('c,d')!();
    releases.get('e,f')!();
    await Promise.all(saves);
    expect(answered).toEqual(['b', 'a', 'c', 'd', 'e', 'f']);
    expect(mostOpen).toBe(2);
  });
});
