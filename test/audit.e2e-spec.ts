import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AuditService } from '../src/audit/audit.service.js';
import { Clock } from '../src/common/clock.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { expectDocumented } from './support/openapi.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface AuditItem {
  id: string;
  at: string;
  actor: { kind: string; id: string | null };
  action: string;
  tenantId: string | null;
  target: string | null;
  userId: string | null;
  requestId: string | null;
  outcome: string;
  count: number;
}
interface AuditPage {
  items: AuditItem[];
  next: string | null;
}
interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

/** The service's clock: real time moved by `offsetMs`, or held at `frozen`. */
class TestClock extends Clock {
  offsetMs = 0;
  frozen: Date | null = null;
  now(): Date {
    return this.frozen ?? new Date(Date.now() + this.offsetMs);
  }
}

const DAY = 86_400_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('the audit trail (API.md sections 4 and 6)', () => {
  let t: TestApp;
  const clock = new TestClock();
  let audit: AuditService;
  /** Every secret this test saw: none may appear in an audit row. */
  const secrets: string[] = [];

  /** The rows of a request, by the x-request-id the test gave it. */
  const rowsOf = async (requestId: string): Promise<AuditItem[]> =>
    (await t.request<AuditPage>('GET', '/v1/audit?limit=500')).body.items.filter((i) => i.requestId === requestId);
  const allRows = async (query = ''): Promise<AuditItem[]> => {
    const items: AuditItem[] = [];
    let after: string | null = null;
    do {
      const q: string = `/v1/audit?limit=500${query}${after ? `&after=${after}` : ''}`;
      const page = await t.request<AuditPage>('GET', q);
      expect(page.status).toBe(200);
      items.push(...page.body.items);
      after = page.body.next;
    } while (after);
    return items;
  };
  const as = (requestId: string, key?: string) => ({ headers: { 'x-request-id': requestId }, ...(key ? { key } : {}) });

  beforeAll(async () => {
    t = await startTestApp({ clock });
    audit = t.app.get(AuditService);
    secrets.push(t.operatorKey, t.config.environments.sandbox!.clientSecret);
  });
  afterAll(async () => {
    await t.close();
  });

  it("records each operator change of a tenant and its credentials once, by 'operator', with the request id and no secret", async () => {
    const created = await t.request<{ id: string; eventsSecret: string }>('POST', '/v1/tenants', {
      body: { id: 'audit-co', name: 'Audit Co', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
      ...as('op-create'),
    });
    expect(created.status).toBe(201);
    secrets.push(created.body.eventsSecret);
    expect((await t.request('PATCH', '/v1/tenants/audit-co', { body: { name: 'Audit Co 2' }, ...as('op-patch') })).status).toBe(200);
    const rotated = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/audit-co/events-secret', as('op-rotate'));
    expect(rotated.status).toBe(201);
    secrets.push(rotated.body.eventsSecret);
    const key = await t.request<{ id: string; key: string }>('POST', '/v1/tenants/audit-co/api-keys', {
      body: { name: 'k' },
      ...as('op-key'),
    });
    expect(key.status).toBe(201);
    secrets.push(key.body.key);
    expect((await t.request('DELETE', `/v1/tenants/audit-co/api-keys/${key.body.id}`, as('op-revoke'))).status).toBe(204);
    await newTenant(t, 'audit-gone');
    expect((await t.request('DELETE', '/v1/tenants/audit-gone', as('op-delete'))).status).toBe(204);

    const expected: Array<[string, string, string | null]> = [
      ['op-create', 'tenant.created', null],
      ['op-patch', 'tenant.updated', null],
      ['op-rotate', 'events_secret.rotated', null],
      ['op-key', 'api_key.created', `api-keys/${key.body.id}`],
      ['op-revoke', 'api_key.revoked', `api-keys/${key.body.id}`],
      ['op-delete', 'tenant.deleted', null],
    ];
    for (const [requestId, action, target] of expected) {
      // The key operation a deletion makes is a row of its own (below).
      const rows = (await rowsOf(requestId)).filter((r) => r.action !== 'tenant_key.destroyed');
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        action,
        actor: { kind: 'operator', id: 'operator' },
        tenantId: requestId === 'op-delete' ? 'audit-gone' : 'audit-co',
        target,
        userId: null,
        outcome: 'success',
        count: 1,
      });
    }
    // Its data keys destroyed with it: how many versions, by the same actor and request, no key.
    expect((await rowsOf('op-delete')).find((r) => r.action === 'tenant_key.destroyed')).toMatchObject({
      actor: { kind: 'operator', id: 'operator' },
      tenantId: 'audit-gone',
      target: null,
      outcome: 'success',
      details: { versions: 1 },
    });
    // A deleted tenant's rows stay for the operator; its own listing is gone with it.
    expect((await allRows('&tenantId=audit-gone')).map((r) => r.action)).toEqual([
      'tenant.deleted',
      'tenant_key.destroyed',
      'tenant.created',
    ]);
    expect((await t.request<ErrorBody>('GET', '/v1/tenants/audit-gone/audit')).body.error.code).toBe('tenant_not_found');
  });

  it('records a refused change as a failure, and never copies a path that names nothing into the row', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    clock.frozen = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 10_000);
    try {
      expect((await t.request('DELETE', `/v1/tenants/audit-co/api-keys/${missing}`, as('op-revoke-missing'))).status).toBe(404);
      expect((await t.request('DELETE', '/v1/tenants/audit-co/api-keys/not-a-key-id', as('op-revoke-garbage'))).status).toBe(404);
    } finally {
      clock.frozen = null;
    }
    // The same failure by the same actor on the same tenant within a minute is one row, counted.
    expect(await rowsOf('op-revoke-missing')).toEqual([
      expect.objectContaining({ action: 'api_key.revoked', outcome: 'failure', target: `api-keys/${missing}`, count: 2 }),
    ]);
    expect(await rowsOf('op-revoke-garbage')).toEqual([]);
    expect(JSON.stringify(await allRows())).not.toContain('not-a-key-id');
  });

  it('records connects, reconnects, webhook provisioning and connection deletes with the actor that made them', async () => {
    await newTenant(t, 'audit-conn');
    const key = await t.request<{ id: string; key: string }>('POST', '/v1/tenants/audit-conn/api-keys', { body: {} });
    secrets.push(key.body.key);
    const first = await connectViaHttp(t, 'audit-conn', { userId: 'u-carol', as: 'carol' });
    const again = await connectViaHttp(t, 'audit-conn', { userId: 'u-carol', as: 'carol' });
    expect(again.connectionId).toBe(first.connectionId);
    const admin = await connectViaHttp(t, 'audit-conn', { kind: 'admin', as: 'admin' });
    expect(admin.status).toBe('connected');
    for (const v of t.sandbox!.issuedTokenValues()) secrets.push(v);

    const rows = await allRows('&tenantId=audit-conn');
    const carol = rows.filter((r) => r.userId === 'u-carol');
    expect(carol.map((r) => r.action)).toEqual(['connection.reconnected', 'connection.created']);
    for (const r of carol) {
      expect(r).toMatchObject({ actor: { kind: 'connect_session' }, target: `connections/${first.connectionId}`, outcome: 'success' });
      expect(r.actor.id).toMatch(UUID);
      expect(r.requestId).toMatch(UUID);
    }
    expect(carol[0].actor.id).not.toBe(carol[1].actor.id);

    const hook = await t.request<{ id: string }>('POST', '/v1/tenants/audit-conn/webhooks', {
      body: { events: ['workflow_step_updated'] },
      ...as('tk-hook', key.body.key),
    });
    expect(hook.status).toBe(201);
    const hookRows = await rowsOf('tk-hook');
    expect(hookRows).toHaveLength(1);
    expect(hookRows[0]).toMatchObject({
      action: 'webhook.provisioned',
      actor: { kind: 'tenant_key', id: key.body.id },
      tenantId: 'audit-conn',
      target: `webhooks/${hook.body.id}`,
      outcome: 'success',
    });
    const receivers = await t.db.query<{ id: string }>('SELECT id FROM webhook_receivers WHERE tenant_id = $1', ['audit-conn']);
    expect(receivers.rows).toHaveLength(1);

    const del = await t.request('DELETE', `/v1/tenants/audit-conn/connections/${first.connectionId}`, as('tk-del', key.body.key));
    expect(del.status).toBe(204);
    const again404 = await t.request('DELETE', `/v1/tenants/audit-conn/connections/${first.connectionId}`, as('tk-del-2', key.body.key));
    expect(again404.status).toBe(404);
    expect(await rowsOf('tk-del')).toEqual([
      expect.objectContaining({
        action: 'connection.deleted',
        actor: { kind: 'tenant_key', id: key.body.id },
        tenantId: 'audit-conn',
        target: `connections/${first.connectionId}`,
        userId: 'u-carol',
        outcome: 'success',
      }),
    ]);
    expect(await rowsOf('tk-del-2')).toEqual([expect.objectContaining({ action: 'connection.deleted', outcome: 'failure', count: 1 })]);
  });

  it("shows a tenant key only its own tenant's rows; another tenant's path is 404, the operator's listing 403", async () => {
    await newTenant(t, 'audit-other');
    const key = await t.request<{ id: string; key: string }>('POST', '/v1/tenants/audit-other/api-keys', { body: {} });
    secrets.push(key.body.key);
    const own = await t.request<AuditPage>('GET', '/v1/tenants/audit-other/audit', { key: key.body.key });
    expect(own.status).toBe(200);
    expect(own.body.items.length).toBeGreaterThan(0);
    expect(own.body.items.every((i) => i.tenantId === 'audit-other')).toBe(true);
    expect(own.body.items.map((i) => i.action)).toEqual(['api_key.created', 'tenant.created']);

    const other = await t.request<ErrorBody>('GET', '/v1/tenants/audit-conn/audit', { key: key.body.key });
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('tenant_not_found');
    const all = await t.request<ErrorBody>('GET', '/v1/audit', { key: key.body.key });
    expect(all.status).toBe(403);
    expect(all.body.error.code).toBe('forbidden');

    const filtered = await allRows('&tenantId=audit-conn');
    expect(filtered.length).toBeGreaterThan(0);
    expect(filtered.every((i) => i.tenantId === 'audit-conn')).toBe(true);
    expect(await allRows('&tenantId=no-such-tenant')).toEqual([]);
  });

  it('pages in a stable order, newest first, and refuses a bad limit or cursor with 400 validation_failed', async () => {
    await newTenant(t, 'audit-pages');
    for (let i = 0; i < 23; i++)
      expect((await t.request('POST', '/v1/tenants/audit-pages/api-keys', { body: { name: `k${i}` } })).status).toBe(201);
    const whole = (await t.request<AuditPage>('GET', '/v1/tenants/audit-pages/audit?limit=500')).body;
    expect(whole.items).toHaveLength(24);
    expect(whole.next).toBeNull();
    const times = whole.items.map((i) => Date.parse(i.at));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const paged: AuditItem[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const page: AuditPage = (await t.request<AuditPage>('GET', `/v1/tenants/audit-pages/audit?limit=5${after ? `&after=${after}` : ''}`))
        .body;
      paged.push(...page.items);
      after = page.next;
      // Rows written while a listing is paged come before its start: they do not move what is still to come.
      if (pages++ === 1) expect((await t.request('POST', '/v1/tenants/audit-pages/api-keys', { body: {} })).status).toBe(201);
    } while (after);
    expect(paged.map((i) => i.id)).toEqual(whole.items.map((i) => i.id));
    expect(pages).toBe(5);

    const first = (await t.request<AuditPage>('GET', '/v1/tenants/audit-pages/audit?limit=5')).body;
    const bad = [
      '/v1/tenants/audit-pages/audit?limit=0',
      '/v1/tenants/audit-pages/audit?limit=501',
      '/v1/tenants/audit-pages/audit?limit=x',
      '/v1/tenants/audit-pages/audit?after=nonsense',
      `/v1/tenants/audit-pages/audit?after=${first.next!.slice(0, -2)}`,
      // A cursor of one listing is not one of another's.
      `/v1/tenants/audit-other/audit?after=${first.next}`,
      `/v1/audit?after=${first.next}`,
      '/v1/audit?tenantId=Not_A_Tenant',
    ];
    for (const path of bad) {
      const res = await t.request<ErrorBody>('GET', path);
      expect([path, res.status, res.body.error?.code]).toEqual([path, 400, 'validation_failed']);
    }
  });

  it('records console sign-in, changes made from the console, sign-out, and failed sign-ins one row a minute', async () => {
    const signIn = (operatorKey: string, requestId: string) =>
      fetch(`${t.url}/console/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ operatorKey }),
      });
    clock.frozen = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 10_000);
    try {
      for (const n of [1, 2, 3]) expect((await signIn(`wrong-key-${'x'.repeat(n)}`, `bad-login-${n}`)).status).toBe(401);
    } finally {
      clock.frozen = null;
    }
    const failures = (await allRows()).filter((r) => r.action === 'console.login' && r.outcome === 'failure');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ actor: { kind: 'console', id: null }, tenantId: null, requestId: 'bad-login-1', count: 3 });

    const ok = await signIn(t.operatorKey, 'good-login');
    expect(ok.status).toBe(201);
    const { csrfToken } = (await ok.json()) as { csrfToken: string };
    const cookie = ok.headers.get('set-cookie')!.split(';')[0];
    secrets.push(cookie.split('=')[1], csrfToken);
    const login = await rowsOf('good-login');
    expect(login).toEqual([
      expect.objectContaining({ action: 'console.login', outcome: 'success', actor: { kind: 'console', id: expect.stringMatching(UUID) } }),
    ]);
    const sessionId = login[0].actor.id;
    const session = await t.db.query<{ id: string }>('SELECT id FROM console_sessions');
    expect(session.rows.map((r) => r.id)).toEqual([sessionId]);

    const fromConsole = { key: null, headers: { cookie, 'x-csrf-token': csrfToken, 'x-request-id': 'console-patch' } };
    expect((await t.request('PATCH', '/v1/tenants/audit-co', { body: { name: 'From the console' }, ...fromConsole })).status).toBe(200);
    expect(await rowsOf('console-patch')).toEqual([
      expect.objectContaining({ action: 'tenant.updated', actor: { kind: 'console', id: sessionId }, tenantId: 'audit-co' }),
    ]);
    const viewed = await t.request<AuditPage>('GET', '/v1/audit?limit=3', fromConsole);
    expect(viewed.status).toBe(200);
    expect(viewed.body.items).toHaveLength(3);

    const out = await t.request('DELETE', '/console/api/session', {
      ...fromConsole,
      headers: { ...fromConsole.headers, 'x-request-id': 'logout' },
    });
    expect(out.status).toBe(204);
    expect(await rowsOf('logout')).toEqual([
      expect.objectContaining({ action: 'console.logout', actor: { kind: 'console', id: sessionId } }),
    ]);
  });

  it("forgetUser drops an erased user's identifiers from their rows and keeps the rows; user.erased carries none", async () => {
    await newTenant(t, 'audit-erase');
    const dave = await connectViaHttp(t, 'audit-erase', { userId: 'u-dave', as: 'dave' });
    await connectViaHttp(t, 'audit-erase', { userId: 'u-dave', as: 'dave' });
    expect((await t.request('DELETE', `/v1/tenants/audit-erase/connections/${dave.connectionId}`)).status).toBe(204);
    const alice = await connectViaHttp(t, 'audit-erase', { userId: 'u-alice', as: 'alice' });
    const before = await allRows('&tenantId=audit-erase');
    const daveRows = before.filter((r) => r.userId === 'u-dave');
    expect(daveRows.map((r) => r.action)).toEqual(['connection.deleted', 'connection.reconnected', 'connection.created']);

    expect(await audit.forgetUser('audit-erase', 'u-dave')).toBe(3);
    await audit.record({
      action: 'user.erased',
      actor: { kind: 'operator', id: 'operator' },
      tenantId: 'audit-erase',
      userId: null,
      requestId: 'erase-dave',
      outcome: 'success',
    });
    const after = await allRows('&tenantId=audit-erase');
    expect(after).toHaveLength(before.length + 1);
    const text = JSON.stringify(after);
    expect(text).not.toContain('u-dave');
    expect(text).not.toContain(dave.connectionId!);
    for (const id of daveRows.map((r) => r.id)) {
      const row = after.find((r) => r.id === id)!;
      expect(row).toMatchObject({ userId: null, target: null, tenantId: 'audit-erase', outcome: 'success' });
      expect(row.action).toBe(daveRows.find((r) => r.id === id)!.action);
      if (row.actor.kind === 'connect_session') expect(row.actor.id).toBeNull();
    }
    expect(after.find((r) => r.requestId === 'erase-dave')).toMatchObject({ action: 'user.erased', userId: null, target: null });
    // Another user's rows are untouched; a second erasure finds nothing left.
    expect(after.filter((r) => r.userId === 'u-alice').map((r) => r.target)).toEqual([`connections/${alice.connectionId}`]);
    expect(await audit.forgetUser('audit-erase', 'u-dave')).toBe(0);
  });

  it("forgetUsersOf drops every end user's identifiers from a deleted tenant's rows, in batches", async () => {
    await t.db.query(
      `INSERT INTO audit_log (id, at, actor_kind, actor_id, action, tenant_id, target, user_id, outcome)
       SELECT gen_random_uuid(), now(), 'connect_session', gen_random_uuid()::text, 'connection.created', 'audit-many',
              'connections/' || gen_random_uuid(), 'user-' || g, 'success'
         FROM generate_series(1, 4100) g`,
    );
    const named = async (tenantId: string) =>
      Number(
        (
          await t.db.query<{ n: string }>(
            'SELECT count(*) AS n FROM audit_log WHERE tenant_id = $1 AND (user_id IS NOT NULL OR target IS NOT NULL OR actor_id IS NOT NULL)',
            [tenantId],
          )
        ).rows[0].n,
      );
    const othersBefore = await named('audit-conn');
    expect(othersBefore).toBeGreaterThan(0);
    expect(await audit.forgetUsersOf('audit-many')).toBe(4100);
    expect(await named('audit-many')).toBe(0);
    expect(Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM audit_log WHERE tenant_id = 'audit-many'`)).rows[0].n)).toBe(
      4100,
    );
    expect(await named('audit-conn')).toBe(othersBefore);
    await t.db.query(`DELETE FROM audit_log WHERE tenant_id = 'audit-many'`);
  });

  it('keeps rows AUDIT_RETENTION_DAYS (400) and sweeps older ones in batches, by the service clock', async () => {
    const old = (days: number) => new Date(Date.now() - days * DAY);
    // 4,500 rows past the window (more than two sweep batches) and one just inside it, seeded directly.
    await t.db.query(
      `INSERT INTO audit_log (id, at, actor_kind, actor_id, action, tenant_id, outcome)
       SELECT gen_random_uuid(), $1::timestamptz - make_interval(secs => g), 'operator', 'operator', 'tenant.updated', 'audit-old', 'success'
         FROM generate_series(1, 4500) g`,
      [old(401)],
    );
    clock.offsetMs = -399 * DAY;
    await audit.record({
      action: 'tenant.updated',
      actor: { kind: 'operator', id: 'operator' },
      tenantId: 'audit-old',
      requestId: 'r-399',
      outcome: 'success',
    });
    clock.offsetMs = 0;
    const count = async () =>
      Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM audit_log WHERE tenant_id = 'audit-old'`)).rows[0].n);
    const total = async () => Number((await t.db.query<{ n: string }>('SELECT count(*) AS n FROM audit_log')).rows[0].n);
    expect(await count()).toBe(4501);
    const others = (await total()) - 4501;

    expect(await audit.sweep()).toBe(4500);
    expect(await count()).toBe(1);
    expect(await total()).toBe(others + 1);
    expect(await audit.sweep()).toBe(0);

    // Two days on (simulated), the 399-day-old row is past the window too; nothing recent goes.
    clock.offsetMs = 2 * DAY;
    try {
      expect(await audit.sweep()).toBe(1);
    } finally {
      clock.offsetMs = 0;
    }
    expect(await count()).toBe(0);
    expect(await total()).toBe(others);
  });

  it('is in the OpenAPI document with its answers and errors', async () => {
    await expectDocumented(t, '/v1/audit', 'get', ['400', '401', '403']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/audit', 'get', ['400', '401', '404']);
  });

  it('never holds a secret in any row', async () => {
    const rows = await t.db.query('SELECT * FROM audit_log');
    expect(rows.rows.length).toBeGreaterThan(20);
    const text = JSON.stringify(rows.rows);
    for (const s of secrets) expect(text.includes(s)).toBe(false);
    for (const k of t.config.vaultKeys) expect(text).not.toContain(k.key.toString('base64'));
    expect(text).not.toContain('Bearer');
  });
});
