import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CHANGES_CHANNEL, parseChanges, type Change } from '../src/changes/change-feed.service.js';
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
    for (const t of ['acme', 'globex']) {
      await db.query(`INSERT INTO tenants (id, name, environment, events_secret_enc) VALUES ($1, $1, 'sandbox', 'not-opened-here')`, [t]);
    }
  });

  afterAll(async () => {
    await Promise.all([db.end(), listener.end()]);
  });

  async function marker(): Promise<string> {
    const m = `marker:${randomUUID()}`;
    await db.query(`SELECT pg_notify($1, $2)`, [CHANGES_CHANNEL, m]);
    for (let i = 0; i < 200 && !heard.includes(m); i++) await new Promise((r) => setTimeout(r, 10));
    expect(heard).toContain(m);
    return m;
  }

  /** The payloads announced while `work` runs (between two marker notifications). */
  async function announced(work: () => Promise<unknown>): Promise<string[]> {
    await marker();
    heard.splice(0, heard.length);
    await work();
    const end = await marker();
    return heard.filter((h) => h !== end);
  }

  const changes = (payloads: string[]): Change[] => payloads.flatMap((p) => parseChanges(p) ?? []);

  const insert = (id: string, tenant = 'acme', user = `u-${id}`) =>
    db.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, refresh_due_at) VALUES ($1, $2, 'user', $3, 'alice', now())`,
      [id, tenant, user],
    );

  it('announces every change of a connection except taking, extending or giving back its renewal lease', async () => {
    const id = randomUUID();
    const key = `connections:acme:${id}`;
    expect(await announced(() => insert(id))).toEqual([key]);
    expect(
      await announced(() =>
        db.query(`UPDATE connections SET lease_owner = 'i-1', lease_until = now() + interval '1 minute' WHERE id = $1`, [id]),
      ),
    ).toEqual([]);
    expect(
      await announced(() => db.query(`UPDATE connections SET lease_until = now() + interval '2 minutes' WHERE id = $1`, [id])),
    ).toEqual([]);
    expect(await announced(() => db.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = $1`, [id]))).toEqual(
      [],
    );
    expect(
      await announced(() => db.query(`UPDATE connections SET version = version + 1, lease_owner = 'i-2' WHERE id = $1`, [id])),
    ).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET refresh_failures = 1 WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET scopes = '["workflows.read"]' WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET upstream_email = NULL WHERE id = $1`, [id]))).toEqual([]);
    expect(await announced(() => db.query(`UPDATE connections SET upstream_email = 'a@example.com' WHERE id = $1`, [id]))).toEqual([key]);
    expect(await announced(() => db.query(`UPDATE connections SET status = 'active' WHERE id = $1 AND false`, [id]))).toEqual([]);
    expect(await announced(() => db.query(`DELETE FROM connections WHERE id = $1`, [id]))).toEqual([key]);
  });

  it('announces a statement once per tenant and per 100 rows, naming every changed row and only those', async () => {
    const acme = Array.from({ length: 250 }, () => randomUUID());
    const globex = Array.from({ length: 3 }, () => randomUUID());
    const rows = [...acme.map((id) => [id, 'acme']), ...globex.map((id) => [id, 'globex'])];
    const inserted = await announced(() =>
      db.query(
        `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id) SELECT r.id::uuid, r.tenant, 'user', 'u-' || r.id, 'x' FROM jsonb_to_recordset($1::jsonb) AS r(id text, tenant text)`,
        [JSON.stringify(rows.map(([id, tenant]) => ({ id, tenant })))],
      ),
    );
    expect(inserted).toHaveLength(4);
    expect(inserted.every((p) => Buffer.byteLength(p) < 8000)).toBe(true);
    expect(
      changes(inserted)
        .map((c) => `${c.tenantId}:${c.id}`)
        .sort(),
    ).toEqual(rows.map(([id, tenant]) => `${tenant}:${id}`).sort());

    // A renewal's group commit: new tokens on some rows, a lease-only update on the others, in one statement.
    const renewed = acme.slice(0, 40);
    const saved = await announced(() =>
      db.query(
        `UPDATE connections SET version = version + CASE WHEN id = ANY($1::uuid[]) THEN 1 ELSE 0 END, lease_owner = 'i-1' WHERE tenant_id = 'acme'`,
        [renewed],
      ),
    );
    expect(
      changes(saved)
        .map((c) => c.id)
        .sort(),
    ).toEqual([...renewed].sort());
    expect(
      changes(await announced(() => db.query(`DELETE FROM connections WHERE tenant_id = 'globex'`)))
        .map((c) => c.id)
        .sort(),
    ).toEqual([...globex].sort());
  });

  it('a tenant deleted with its connections (foreign-key cascade) announces the tenant and each connection', async () => {
    await db.query(
      `INSERT INTO tenants (id, name, environment, events_secret_enc) VALUES ('initech', 'Initech', 'sandbox', 'not-opened-here')`,
    );
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) await insert(id, 'initech');
    const payloads = await announced(() => db.query(`DELETE FROM tenants WHERE id = 'initech'`));
    const heardChanges = changes(payloads);
    expect(heardChanges.filter((c) => c.table === 'tenants')).toEqual([{ table: 'tenants', tenantId: 'initech', id: 'initech' }]);
    expect(
      heardChanges
        .filter((c) => c.table === 'connections')
        .map((c) => c.id)
        .sort(),
    ).toEqual([...ids].sort());
  });

  it('the update trigger compares every column of connections but the two lease columns (a new column must join it)', async () => {
    const columns = (
      await db.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_name = 'connections'`)
    ).rows.map((c) => c.column_name);
    const def = await db.query<{ def: string }>(`SELECT pg_get_functiondef('cws_notify_connection_updates'::regproc) AS def`);
    const compared = columns.filter((c) => new RegExp(`\\b${c}\\b`).test(def.rows[0].def));
    expect(compared.sort()).toEqual(columns.filter((c) => c !== 'lease_owner' && c !== 'lease_until').sort());
    // The row trigger that marks a statement for the comparison fires for an UPDATE naming any of the same columns.
    const marked = await db.query<{ column_name: string }>(
      `SELECT a.attname AS column_name FROM pg_trigger t JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr::int2[])
        WHERE t.tgname = 'tr_connections_changed'`,
    );
    expect(marked.rows.map((r) => r.column_name).sort()).toEqual(columns.filter((c) => c !== 'lease_owner' && c !== 'lease_until').sort());
  });

  it('an UPDATE of the lease alone runs no comparison; a change after it in the same transaction is still announced', async () => {
    const id = randomUUID();
    await insert(id);
    // The mark a changed row leaves for the statement trigger, which clears it ('off') once it has compared the rows
    // ('': never set in this transaction).
    const mark = async () =>
      (await db.query<{ mark: string | null }>(`SELECT current_setting('cws.connections_changed', true) AS mark`)).rows[0].mark ?? '';
    // The trigger functions called in this transaction (pg_stat_xact_user_functions: this transaction's own counts).
    const marks = async () =>
      Number(
        (await db.query<{ calls: string }>(`SELECT calls FROM pg_stat_xact_user_functions WHERE funcname = 'cws_mark_connections_changed'`))
          .rows[0]?.calls ?? 0,
      );
    const key = `connections:acme:${id}`;
    const payloads = await announced(async () => {
      await db.query('BEGIN');
      await db.query(`SET LOCAL track_functions = 'pl'`);
      await db.query(`UPDATE connections SET lease_owner = 'i-1', lease_until = now() + interval '1 minute' WHERE id = $1`, [id]);
      expect({ marks: await marks(), mark: await mark() }).toEqual({ marks: 0, mark: '' });
      await db.query(`UPDATE connections SET version = version + 1 WHERE id = $1`, [id]);
      expect({ marks: await marks(), mark: await mark() }).toEqual({ marks: 1, mark: 'off' });
      await db.query(`UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = $1`, [id]);
      await db.query(`UPDATE connections SET refresh_failures = refresh_failures + 1 WHERE id = $1`, [id]);
      expect({ marks: await marks(), mark: await mark() }).toEqual({ marks: 2, mark: 'off' });
      await db.query('COMMIT');
    });
    // Two changes of one row, one notification (NOTIFY folds the same payload within a transaction).
    expect(payloads).toEqual([key]);
  });
});
