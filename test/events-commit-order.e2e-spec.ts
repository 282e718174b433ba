import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { EventsRepository } from '../src/events/events.repository.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface EventPage {
  events: Array<{ id: string; type: string }>;
  next: string | null;
}

/**
 * Transactions that insert events may commit in any order (two inbound group commits in flight, a
 * connection's event recorded with its change): the events API must never hand out a cursor past a row
 * that commits later with a lower seq (docs/webhooks.md, "Commit order").
 */
describe('events API: no row is passed over when writers commit out of order', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    for (const id of ['order', 'elsewhere']) {
      const res = await t.request('POST', '/v1/tenants', {
        body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
      });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Pages the tenant's events from `after` to the end; answers the ids seen and the cursor to continue with. */
  async function readOn(tenantId: string, after: string | null): Promise<{ ids: string[]; next: string | null }> {
    const ids: string[] = [];
    for (;;) {
      const page = await t.request<EventPage>('GET', `/v1/tenants/${tenantId}/events?limit=1${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      if (page.body.events.length === 0) return { ids, next: after };
      ids.push(...page.body.events.map((e) => e.id));
      after = page.body.next;
    }
  }

  async function idOf(marker: string): Promise<{ id: string; seq: number }> {
    const rows = await t.db.query<{ id: string; seq: string }>(`SELECT id, seq FROM events WHERE payload->>'marker' = $1`, [marker]);
    return { id: rows.rows[0].id, seq: Number(rows.rows[0].seq) };
  }

  it('a row committed after a reader paged past later rows is still read: the reader stops below the open writer', async () => {
    const events = t.app.get(EventsRepository);
    const [slow, fast] = [randomUUID(), randomUUID()];
    let commit: () => void = () => undefined;
    let recorded: () => void = () => undefined;
    const slowRecorded = new Promise<void>((r) => (recorded = r));
    // A writer that takes its seq first and commits last, as a connection change recording its event does.
    const slowWriter = t.app.get(DataSource).transaction(async (m) => {
      await events.record({ tenantId: 'order', source: 'service', type: 'slow', payload: { marker: slow } }, m);
      recorded();
      await new Promise<void>((r) => (commit = r));
    });
    await slowRecorded;
    await events.record({ tenantId: 'order', source: 'upstream', type: 'fast', payload: { marker: fast } });

    const before = await readOn('order', null);
    expect(before.ids).toEqual([]);
    commit();
    await slowWriter;
    const after = await readOn('order', before.next);

    const [s, f] = [await idOf(slow), await idOf(fast)];
    // The case this proves: the row committed last holds the lower seq.
    expect(s.seq).toBeLessThan(f.seq);
    expect([...before.ids, ...after.ids]).toEqual([s.id, f.id]);
  });

  it('a transaction open in another database does not hold the events back', async () => {
    const other = new URL(t.databaseUrl);
    other.pathname = '/postgres';
    const client = new pg.Client({ connectionString: other.toString() });
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_current_xact_id()'); // takes a transaction id, as a writer there does
      const marker = randomUUID();
      await t.app.get(EventsRepository).record({ tenantId: 'elsewhere', source: 'upstream', type: 'seen', payload: { marker } });
      const { ids } = await readOn('elsewhere', null);
      expect(ids).toEqual([(await idOf(marker)).id]);
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    }
  });

  it('a cursor of the earlier form (s<seq>) still reads on from that seq', async () => {
    const marker = randomUUID();
    await t.app.get(EventsRepository).record({ tenantId: 'elsewhere', source: 'upstream', type: 'later', payload: { marker } });
    const old = Buffer.from('s0', 'utf8').toString('base64url');
    const { ids } = await readOn('elsewhere', old);
    expect(ids.at(-1)).toBe((await idOf(marker)).id);
    for (const bad of ['x01.5', 'x18446744073709551616.1', 'x1.', 'x.1', 's01']) {
      const res = await t.request('GET', `/v1/tenants/elsewhere/events?after=${Buffer.from(bad, 'utf8').toString('base64url')}`);
      expect([bad, res.status]).toEqual([bad, 400]);
    }
  });
});
