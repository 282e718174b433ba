import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { GroupCommitLane } from '../src/connections/store/commit-lane.js';
import { createTestDatabase, openPool } from './support/test-database.js';

/**
 * Renewal's commit lane (src/connections/store/commit-lane.ts) on a real PostgreSQL: a lone pair commits at once,
 * the pairs that arrive during a commit go together in the next one and wait for nothing else, a failed
 * statement fails its pairs at once, and a lost connection never makes a pair wait for a reconnect.
 */
describe('GroupCommitLane', () => {
  let databaseUrl: string;
  let db: pg.Pool;
  const lanes: Array<GroupCommitLane<{ id: string }>> = [];

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    db = openPool(databaseUrl);
    await db.query(`CREATE TABLE lane_probe (id text PRIMARY KEY, owner text NOT NULL)`);
  });

  afterAll(async () => {
    await Promise.all(lanes.map((l) => l.close()));
    await db?.end();
  });

  /** A lane whose statement inserts the ids (an id starting with "bad" fails the statement: it is cast to an integer) and records each statement's ids. */
  function lane(name: string, holds = 4, gate?: () => Promise<void>) {
    const statements: string[][] = [];
    const l = new GroupCommitLane<{ id: string }>(
      { connectionString: databaseUrl, applicationName: name, options: '', holds, idleMs: 10_000, connectTimeoutMs: 5000 },
      async (run, owner, items) => {
        statements.push(items.map((i) => i.id));
        await gate?.();
        const { rows } = await run({
          text: `INSERT INTO lane_probe (id, owner) SELECT id, $2 FROM unnest($1::text[]) AS id
                  WHERE (CASE WHEN id LIKE 'bad%' THEN id::int ELSE 0 END) = 0 ON CONFLICT DO NOTHING RETURNING id`,
          values: [items.map((i) => i.id), owner],
        });
        return new Set(rows.map((r) => r.id as string));
      },
    );
    lanes.push(l);
    return { lane: l, statements };
  }

  const stored = async (ids: string[]) =>
    (await db.query<{ id: string }>(`SELECT id FROM lane_probe WHERE id = ANY($1::text[]) ORDER BY id`, [ids])).rows.map((r) => r.id);

  it('commits a lone pair at once, and the pairs that arrive during that commit together in the next statement', async () => {
    let open: () => void = () => undefined;
    let first = true;
    const { lane: l, statements } = lane('lane-group', 4, async () => {
      if (!first) return;
      first = false;
      await new Promise<void>((r) => (open = r));
    });
    const holds = await Promise.all([l.reserve(), l.reserve(), l.reserve(), l.reserve()]);
    const a = holds[0].save('me', { id: 'g-a' });
    await new Promise((r) => setImmediate(r));
    expect(statements).toEqual([['g-a']]);
    const rest = ['g-b', 'g-c', 'g-d'].map((id, i) => holds[i + 1].save('me', { id }));
    await new Promise((r) => setTimeout(r, 50));
    // Nothing else starts while the first commit is in flight.
    expect(statements).toEqual([['g-a']]);
    open();
    expect(await a).toBe(true);
    expect(await Promise.all(rest)).toEqual([true, true, true]);
    expect(statements).toEqual([['g-a'], ['g-b', 'g-c', 'g-d']]);
    expect(await stored(['g-a', 'g-b', 'g-c', 'g-d'])).toEqual(['g-a', 'g-b', 'g-c', 'g-d']);
    // A pair whose condition did not hold answers false (the renewal's lost compare-and-swap).
    expect(await holds[0].save('me', { id: 'g-a' })).toBe(false);
    for (const h of holds) h.release();
  });

  it('hands out at most `holds` holds; the next waits until one is released', async () => {
    const { lane: l } = lane('lane-holds', 2);
    const [h1, h2] = await Promise.all([l.reserve(), l.reserve()]);
    let third = false;
    const waiting = l.reserve().then((h) => {
      third = true;
      return h;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(third).toBe(false);
    h1.release();
    h1.release();
    const h3 = await waiting;
    expect(third).toBe(true);
    expect(await h3.save('me', { id: 'h-1' })).toBe(true);
    h2.release();
    h3.release();
  });

  it('fails every pair of a refused statement at once, without a retry, and carries on', async () => {
    let open: () => void = () => undefined;
    let first = true;
    const { lane: l, statements } = lane('lane-refused', 4, async () => {
      if (!first) return;
      first = false;
      await new Promise<void>((r) => (open = r));
    });
    const holds = await Promise.all([l.reserve(), l.reserve(), l.reserve(), l.reserve()]);
    const a = holds[0].save('me', { id: 'r-a' });
    await new Promise((r) => setImmediate(r));
    const group = [holds[1].save('me', { id: 'r-b' }), holds[2].save('me', { id: 'bad-r' })];
    open();
    expect(await a).toBe(true);
    const outcomes = await Promise.allSettled(group);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(statements).toEqual([['r-a'], ['r-b', 'bad-r']]);
    expect(await stored(['r-b', 'bad-r'])).toEqual([]);
    expect(await holds[3].save('me', { id: 'r-c' })).toBe(true);
    for (const h of holds) h.release();
  });

  it('drops a connection the server closed: pairs fail at once rather than wait, and the next hold reopens it', async () => {
    const { lane: l } = lane('lane-broken');
    const h1 = await l.reserve();
    expect(await h1.save('me', { id: 'b-1' })).toBe(true);
    await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lane-broken'`);
    await expect(h1.save('me', { id: 'b-2' })).rejects.toBeDefined();
    // The connection is gone: a save fails into its own retry at once, with no reconnect in its way.
    await expect(h1.save('me', { id: 'b-3' })).rejects.toMatchObject({ code: 'CWS_LANE_CLOSED' });
    h1.release(true);
    const h2 = await l.reserve();
    expect(await h2.save('me', { id: 'b-4' })).toBe(true);
    h2.release();
    expect(await stored(['b-1', 'b-2', 'b-3', 'b-4'])).toEqual(['b-1', 'b-4']);
  });
});
