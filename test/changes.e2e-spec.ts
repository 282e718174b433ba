import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CHANGES_CHANNEL } from '../src/changes/change-feed.service.js';
import { createTestDatabase } from './support/test-database.js';

/** What the triggers of the migrated schema announce on cws_changes, heard by a plain LISTEN. */
describe('change announcements (NOTIFY triggers)', () => {
  let db: pg.Client;
  let listener: pg.Client;
  const heard: string[] = [];

  beforeAll(async () => {
    const url = await createTestDatabase();
    db = new pg.Client({ connectionString: url });
    listener = new pg.Client({ connectionString: url });
    await Promise.all([db.connect(), listener.connect()]);
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`LISTEN ${CHANGES_CHANNEL}`);
    await db.query(`INSERT INTO tenants (id, name, environment, events_secret_enc) VALUES ('acme', 'Acme', 'sandbox', 'not-opened-here')`);
  });

  afterAll(async () => {
    await Promise.all([db.end(), listener.end()]);
  });

  /** The notifications that arrive while `work` runs, after a marker round trip that flushes the ones before. */
  async function announced(work: () => Promise<unknown>): Promise<string[]> {
    const marker = `marker:${randomUUID()}`;
    const flush = async () => {
      await db.query(`SELECT pg_notify($1, $2)`, [CHANGES_CHANNEL, marker]);
      for (let i = 0; i < 100 && !heard.includes(marker); i++) await new Promise((r) => setTimeout(r, 10));
      expect(heard).toContain(marker);
      heard.splice(0, heard.length);
    };
    await flush();
    await work();
    const end = `marker:${randomUUID()}`;
    await db.query(`SELECT pg_notify($1, $2)`, [CHANGES_CHANNEL, end]);
    for (let i = 0; i < 100 && !heard.includes(end); i++) await new Promise((r) => setTimeout(r, 10));
    return heard.filter((h) => h !== end);
  }

  it('announces every change of a connection except taking, extending or giving back its renewal lease', async () => {
    const id = randomUUID();
    const key = `connections:acme:${id}`;
    expect(
      await announced(() =>
        db.query(`INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, refresh_due_at) VALUES ($1, 'acme', 'user', 'u-1', 'alice', now())`, [id]),
      ),
    ).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET lease_owner = 'i-1', lease_until = now() + interval '1 minute' WHERE id = $1`, [id]))).toEqual([]);
    expect(await announced(() => db.query(`UPDATE connections SET lease_until = now() + interval '2 minutes' WHERE id = $1`, [id]))).toEqual([]);
    expect(await announced(() => db.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = $1`, [id]))).toEqual([]);
    expect(await announced(() => db.query(`UPDATE connections SET version = version + 1, lease_owner = NULL WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET refresh_failures = 1 WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET scopes = '["workflows.read"]' WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`DELETE FROM connections WHERE id = $1`, [id]))).toEqual([key]);
  });

  it('the update trigger compares every column of connections but the two lease columns (a new column must join it)', async () => {
    const columns = await db.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_name = 'connections' ORDER BY ordinal_position`);
    const def = await db.query<{ def: string }>(`SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'tr_connections_notify_update'`);
    expect(def.rows).toHaveLength(1);
    const compared = columns.rows.map((c) => c.column_name).filter((c) => new RegExp(`\\bold\\.${c}\\b`, 'i').test(def.rows[0].def));
    expect(compared).toEqual(columns.rows.map((c) => c.column_name).filter((c) => c !== 'lease_owner' && c !== 'lease_until'));
  });
});
