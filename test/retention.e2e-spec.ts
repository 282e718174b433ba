import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Clock } from '../src/common/clock.js';
import { EventDeliveryService } from '../src/events/event-delivery.service.js';
import { EventsRepository } from '../src/events/events.repository.js';
import { RetentionService, type RetentionRun } from '../src/retention/retention.service.js';
import { authorizeAtSandbox, connectViaHttp, newTenant, openCallback } from './support/connect.js';
import { expectDocumented } from './support/openapi.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const DAY = 86_400_000;

/** The service's clock, moved by the test: days pass without waiting. */
class TestClock extends Clock {
  // Three days ahead of the wall clock: past the first partition the migration attached (it ends the day after tomorrow).
  at = Date.now() + 3 * DAY;
  now(): Date {
    return new Date(this.at);
  }
  advanceDays(days: number): void {
    this.at += days * DAY;
  }
}

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface TenantBody {
  id: string;
  eventRetentionDays: number;
}
interface EventItem {
  id: string;
  type: string;
  payload: unknown;
}

describe('retention, erasure and tenant deletion (API.md sections 4, 6 and 8; docs/data-retention.md, "What is kept")', () => {
  let t: TestApp;
  const clock = new TestClock();
  const sinks: WebhookSink[] = [];

  beforeAll(async () => {
    t = await startTestApp({
      sandbox: true,
      clock,
      env: { EVENTS_RELAY_INTERVAL_MS: '100', EVENTS_POLL_INTERVAL_MS: '500', EVENTS_MAINTENANCE_SECONDS: '1' },
    });
    // The tests drive every retention run themselves (runToEnd) and count what each run removed: the service's
    // own minute timer stops here, or a run of its own could remove rows between a test's moves and its count.
    await t.app.get(RetentionService).onModuleDestroy();
  });
  afterAll(async () => {
    await t?.close();
    for (const s of sinks) await s.close();
  });

  const retention = () => t.app.get(RetentionService);
  /** Runs retention until nothing is left for a next run. */
  async function runToEnd(): Promise<RetentionRun[]> {
    const runs: RetentionRun[] = [];
    for (let i = 0; i < 100; i++) {
      const run = await retention().runOnce();
      if (!run) throw new Error('another run held the retention lock');
      runs.push(run);
      if (!run.more) return runs;
    }
    throw new Error('retention did not finish in 100 runs');
  }

  async function record(tenantId: string, marker = randomUUID()): Promise<string> {
    await t.app.get(EventsRepository).record({ tenantId, source: 'upstream', type: 'workflow_step_updated', payload: { marker } });
    const row = await t.db.query<{ id: string }>(`SELECT id FROM events WHERE payload->>'marker' = $1`, [marker]);
    return row.rows[0].id;
  }

  const listed = async (tenantId: string): Promise<string[]> => {
    const res = await t.request<{ events: EventItem[] }>('GET', `/v1/tenants/${tenantId}/events?limit=500`);
    expect(res.status).toBe(200);
    return res.body.events.map((e) => e.id);
  };
  /**
   * The tenant's listing once it shows `expected`: the listing holds back what an open transaction (of this
   * database, or of one that ended while it read) might still precede (EventsRepository.listAfter), so a row
   * just written shows on a later read, not necessarily the first.
   */
  const listedOnce = async (tenantId: string, expected: string[]): Promise<string[]> => {
    let ids: string[] = [];
    await waitUntil(`${tenantId}'s listing shows what was recorded`, async () => {
      ids = await listed(tenantId);
      return expected.every((id) => ids.includes(id));
    });
    return ids;
  };
  const redeliver = (tenantId: string, id: string) => t.request<ErrorBody>('POST', `/v1/tenants/${tenantId}/events/${id}/redeliver`);
  const stored = async (sql: string, params: unknown[]): Promise<number> =>
    Number((await t.db.query<{ n: string }>(sql, params)).rows[0].n);

  async function tenantWithSink(id: string, over: Record<string, unknown> = {}): Promise<WebhookSink> {
    const sink = await WebhookSink.start();
    sinks.push(sink);
    await newTenant(t, id, { eventsTargetUrl: sink.url, ...over });
    return sink;
  }

  it('answers eventRetentionDays on every tenant, takes 1–400 on POST and PATCH, refuses anything else', async () => {
    await newTenant(t, 'win-default');
    const created = await t.request<TenantBody>('POST', '/v1/tenants', {
      body: { id: 'win-own', name: 'own', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], eventRetentionDays: 7 },
    });
    expect(created.status).toBe(201);
    expect(created.body.eventRetentionDays).toBe(7);
    expect((await t.request<TenantBody>('GET', '/v1/tenants/win-default')).body.eventRetentionDays).toBe(30);
    const list = await t.request<TenantBody[]>('GET', '/v1/tenants');
    expect(list.body.find((x) => x.id === 'win-own')?.eventRetentionDays).toBe(7);
    for (const bad of [0, 401, 2.5, '7']) {
      const res = await t.request<ErrorBody>('PATCH', '/v1/tenants/win-own', { body: { eventRetentionDays: bad } });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    expect(
      (await t.request<TenantBody>('PATCH', '/v1/tenants/win-own', { body: { eventRetentionDays: 400 } })).body.eventRetentionDays,
    ).toBe(400);
    expect(
      (await t.request<TenantBody>('PATCH', '/v1/tenants/win-own', { body: { eventRetentionDays: null } })).body.eventRetentionDays,
    ).toBe(30);
    await expectDocumented(t, '/v1/tenants/{tenantId}', 'patch', ['400']);
  });

  it('a tenant with a shorter window: its expired events are hidden at once (not listed, 410 on redeliver), then swept; others keep theirs', async () => {
    await tenantWithSink('short', { eventRetentionDays: 2 });
    await tenantWithSink('long');
    const oldShort = await record('short');
    const oldLong = await record('long');
    clock.advanceDays(3);
    const newShort = await record('short');

    // Before any sweep: hidden by the window alone.
    expect(await listedOnce('short', [newShort])).toEqual([newShort]);
    const gone = await redeliver('short', oldShort);
    expect(gone.status).toBe(410);
    expect(gone.body.error.code).toBe('event_expired');
    expect((await t.request('GET', `/v1/tenants/short/events/${oldShort}/attempts`)).status).toBe(404);
    expect(await listedOnce('long', [oldLong])).toContain(oldLong);
    expect((await redeliver('long', oldLong)).status).toBe(202);
    expect(await stored(`SELECT count(*) AS n FROM events WHERE id = $1`, [oldShort])).toBe(1);

    // A run skips a row another transaction holds (the delivery of that event, here to the tenant's sink): the
    // next run takes it. Runs go on until it is swept.
    let swept = 0;
    await waitUntil('the expired event swept', async () => {
      swept += (await runToEnd()).reduce((n, r) => n + r.swept, 0);
      return (await stored(`SELECT count(*) AS n FROM events WHERE id = $1`, [oldShort])) === 0;
    });
    expect(swept).toBeGreaterThanOrEqual(1);
    expect(await stored(`SELECT count(*) AS n FROM events WHERE id = ANY($1::uuid[])`, [[newShort, oldLong]])).toBe(2);
    expect((await redeliver('short', oldShort)).status).toBe(410);
  });

  it('past the longest window an event and its attempts are gone: not listed, 410 on redeliver, their day partitions dropped', async () => {
    const sink = await tenantWithSink('expiry');
    const day = new Date(clock.now().toISOString().slice(0, 10));
    const partition = `events_p${day.toISOString().slice(0, 10).replaceAll('-', '')}`;
    const id = await record('expiry');
    t.app.get(EventDeliveryService).kick();
    await waitUntil('delivered', () => sink.accepted().some((d) => d.headers['webhook-id'] === id));
    await waitUntil('attempt kept', async () => (await stored(`SELECT count(*) AS n FROM event_attempts WHERE event_id = $1`, [id])) === 1);
    const attemptsPartition = (
      await t.db.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM event_attempts WHERE event_id = $1`, [id])
    ).rows[0].p;
    expect(await listedOnce('expiry', [id])).toEqual([id]);

    clock.advanceDays(31);
    expect(await listed('expiry')).toEqual([]);
    const runs = await runToEnd();
    const dropped = runs.flatMap((r) => r.dropped);
    expect(dropped).toEqual(expect.arrayContaining([partition, attemptsPartition]));
    expect(await stored(`SELECT count(*) AS n FROM pg_class WHERE relname = ANY($1::text[])`, [[partition, attemptsPartition]])).toBe(0);
    expect(await stored(`SELECT count(*) AS n FROM events WHERE id = $1`, [id])).toBe(0);
    expect(await stored(`SELECT count(*) AS n FROM event_attempts WHERE event_id = $1`, [id])).toBe(0);
    // The row is gone, and its id still answers 410: a time-ordered id names when it was made.
    const res = await redeliver('expiry', id);
    expect(res.status).toBe(410);
    expect(res.body.error.code).toBe('event_expired');
    expect((await redeliver('expiry', randomUUID())).status).toBe(404);
    // The days ahead are there for what comes next.
    const fresh = await record('expiry');
    expect(await listedOnce('expiry', [fresh])).toEqual([fresh]);
  });

  it('erases an end user: connections, tokens, renewal history, sessions, their events and attempts; 204 twice; user.erased names no one', async () => {
    const sink = await tenantWithSink('erase');
    const alice = await connectViaHttp(t, 'erase', { userId: 'partner-u1', as: 'alice' });
    const bob = await connectViaHttp(t, 'erase', { userId: 'partner-u2', as: 'bob' });
    expect(alice.status).toBe('connected');
    expect((await t.request('POST', `/v1/tenants/erase/connections/${alice.connectionId}/refresh`)).status).toBe(200);
    const pending = await t.request('POST', '/v1/tenants/erase/connect-sessions', {
      body: { kind: 'user', userId: 'partner-u1', returnUrl: 'http://localhost:5173/' },
    });
    expect(pending.status).toBe(201);
    t.app.get(EventDeliveryService).kick();
    await waitUntil(
      'connection.created delivered twice',
      () => sink.accepted().filter((d) => d.body.type === 'connection.created').length === 2,
    );
    await waitUntil('attempts kept', async () => (await stored(`SELECT count(*) AS n FROM event_attempts`, [])) >= 2);

    const first = await t.request('DELETE', '/v1/tenants/erase/users/partner-u1');
    expect(first.status).toBe(204);
    const u1 = ['erase', 'partner-u1'];
    expect(await stored(`SELECT count(*) AS n FROM connections WHERE tenant_id = $1 AND user_id = $2`, u1)).toBe(0);
    expect(await stored(`SELECT count(*) AS n FROM connection_health WHERE connection_id = $1`, [alice.connectionId])).toBe(0);
    expect(await stored(`SELECT count(*) AS n FROM connect_sessions WHERE tenant_id = $1 AND user_id = $2`, u1)).toBe(0);
    expect(
      await stored(`SELECT count(*) AS n FROM events WHERE tenant_id = $1 AND (user_id = $2 OR payload::text LIKE '%' || $2 || '%')`, u1),
    ).toBe(0);
    expect(
      await stored(
        `SELECT count(*) AS n FROM event_attempts a WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id) AND a.at >= $1`,
        [new Date(clock.now().getTime() - DAY)],
      ),
    ).toBe(0);
    // The audit trail keeps the erasure and the user's earlier changes, without naming the user anywhere.
    expect(await stored(`SELECT count(*) AS n FROM audit_log WHERE tenant_id = 'erase' AND action = 'user.erased'`, [])).toBe(1);
    expect(await stored(`SELECT count(*) AS n FROM audit_log WHERE tenant_id = 'erase' AND action = 'connection.created'`, [])).toBe(2);
    expect(await stored(`SELECT count(*) AS n FROM audit_log WHERE row_to_json(audit_log)::text LIKE '%partner-u1%'`, [])).toBe(0);
    expect(await stored(`SELECT count(*) AS n FROM audit_log WHERE user_id = 'partner-u2'`, [])).toBeGreaterThan(0);
    // The other user is untouched.
    expect(await stored(`SELECT count(*) AS n FROM connections WHERE id = $1`, [bob.connectionId])).toBe(1);
    expect(await stored(`SELECT count(*) AS n FROM events WHERE tenant_id = 'erase' AND user_id = 'partner-u2'`, [])).toBe(1);

    const again = await t.request('DELETE', '/v1/tenants/erase/users/partner-u1');
    expect(again.status).toBe(204);
    t.app.get(EventDeliveryService).kick();
    const erased = await waitUntil('user.erased delivered', () => sink.accepted().find((d) => d.body.type === 'user.erased'));
    expect(erased.raw).not.toContain('partner-u1');
    expect(erased.raw).not.toContain('alice');
    expect(erased.body.data).toMatchObject({ type: 'user.erased', tenantId: 'erase', connections: 1 });
    expect((await t.request<ErrorBody>('DELETE', '/v1/tenants/nope/users/partner-u1')).body.error.code).toBe('tenant_not_found');
    expect((await t.request<ErrorBody>('DELETE', `/v1/tenants/erase/users/${'x'.repeat(201)}`)).status).toBe(400);
    await expectDocumented(t, '/v1/tenants/{tenantId}/users/{userId}', 'delete', ['400', '401', '404']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/events/{eventId}/redeliver', 'post', ['404', '410']);
  });

  it('an erasure racing a connect of the same user leaves nothing of the user, whichever commits first', async () => {
    await tenantWithSink('race');
    const leftOf = async (userId: string) =>
      (await stored(`SELECT count(*) AS n FROM connections WHERE tenant_id = 'race' AND user_id = $1`, [userId])) +
      (await stored(`SELECT count(*) AS n FROM connect_sessions WHERE tenant_id = 'race' AND user_id = $1`, [userId])) +
      (await stored(`SELECT count(*) AS n FROM events WHERE tenant_id = 'race' AND (user_id = $1 OR payload->>'userId' = $1)`, [userId]));

    // Erased between the consent and the callback: the callback stores nothing.
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/race/connect-sessions', {
      body: { kind: 'user', userId: 'late', returnUrl: 'http://localhost:5173/' },
    });
    const callback = await authorizeAtSandbox(session.body.connectUrl, 'carol', 'approve');
    expect((await t.request('DELETE', '/v1/tenants/race/users/late')).status).toBe(204);
    expect((await openCallback(callback)).status).toBe(400);
    expect(await leftOf('late')).toBe(0);

    // The callback and the erasure at the same moment, many times: whichever wins, nothing survives.
    for (let round = 0; round < 8; round++) {
      const userId = `racer-${round}`;
      const s = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/race/connect-sessions', {
        body: { kind: 'user', userId, returnUrl: 'http://localhost:5173/' },
      });
      const cb = await authorizeAtSandbox(s.body.connectUrl, 'dave', 'approve');
      const [back, erase] = await Promise.all([openCallback(cb), t.request('DELETE', `/v1/tenants/race/users/${userId}`)]);
      expect(erase.status).toBe(204);
      // 302: the connect committed first (and was erased); 400: the erasure did, and the callback stored nothing.
      expect([302, 400]).toContain(back.status);
      expect(await leftOf(userId)).toBe(0);
    }
  });

  it('deleting a tenant: 404 and its keys refused at once; its rows go in batches while other tenants keep being served', async () => {
    await newTenant(t, 'doomed');
    await newTenant(t, 'busy');
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/doomed/api-keys', { body: {} });
    await connectViaHttp(t, 'doomed', { userId: 'd1', as: 'alice' });
    await t.db.query(
      `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state)
       SELECT gen_random_uuid(), 'doomed', 'upstream', 'bulk', '{"n":1}', $1, 'no_target' FROM generate_series(1, 20000)`,
      [clock.now()],
    );
    expect((await t.request('GET', '/v1/tenants/doomed/events', { key: key.body.key })).status).toBe(200);

    expect((await t.request('DELETE', '/v1/tenants/doomed')).status).toBe(204);
    expect((await t.request<ErrorBody>('GET', '/v1/tenants/doomed')).body.error.code).toBe('tenant_not_found');
    expect((await t.request('GET', '/v1/tenants/doomed/events', { key: key.body.key })).status).toBe(401);
    expect((await t.request<TenantBody[]>('GET', '/v1/tenants')).body.map((x) => x.id)).not.toContain('doomed');
    expect((await t.request('DELETE', '/v1/tenants/doomed')).status).toBe(404);
    await expect(t.app.get(EventsRepository).record({ tenantId: 'doomed', source: 'service', type: 'x', payload: {} })).rejects.toThrow(
      'unknown tenant',
    );

    // Removal in small runs while the other tenant writes and reads.
    let served = 0;
    let removing = true;
    const load = (async () => {
      while (removing) {
        await record('busy');
        const list = await t.request('GET', '/v1/tenants/busy/events?limit=5');
        expect(list.status).toBe(200);
        served++;
      }
    })();
    let runs = 0;
    for (;;) {
      const run = await retention().runOnce({ maxBatches: 2, batchRows: 2000 });
      runs++;
      if (run && !run.more && run.tenantsRemoved.includes('doomed')) break;
      if (runs > 100) throw new Error('the deletion did not finish');
    }
    removing = false;
    await load;
    expect(runs).toBeGreaterThan(3);
    expect(served).toBeGreaterThan(0);
    await waitUntil('every event the load recorded listed', async () => (await listed('busy')).length >= served);
    expect((await listed('busy')).length).toBe(served);
    for (const table of ['events', 'connections', 'connect_sessions', 'tenant_api_keys', 'tenants']) {
      const column = table === 'tenants' ? 'id' : 'tenant_id';
      expect(await stored(`SELECT count(*) AS n FROM ${table} WHERE ${column} = 'doomed'`, [])).toBe(0);
    }
  });
});

describe('a retention run cut short by a restart resumes, and loses nothing else', () => {
  it('sweeps what is left of a window and of a deleted tenant after the restart', async () => {
    const clock = new TestClock();
    const first = await startTestApp({ sandbox: true, clock });
    const databaseUrl = first.databaseUrl;
    const vaultKeys = first.config.vaultKeys.map((k) => `${k.kid}:${k.key.toString('base64')}`).join(',');
    let second: TestApp | null = null;
    try {
      for (const [id, days] of [
        ['sweepme', 1],
        ['keepme', 30],
        ['dropme', 30],
      ] as const) {
        const res = await first.request('POST', '/v1/tenants', {
          body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], eventRetentionDays: days },
        });
        expect(res.status).toBe(201);
      }
      const seed = (tenantId: string, at: Date, n: number, type: string) =>
        first.db.query(
          `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state)
           SELECT gen_random_uuid(), $1, 'upstream', $4, '{}', $2, 'no_target' FROM generate_series(1, $3)`,
          [tenantId, at, n, type],
        );
      const old = new Date(clock.now().getTime() - 2 * DAY);
      await seed('sweepme', old, 5000, 'old');
      await seed('sweepme', clock.now(), 100, 'new');
      await seed('keepme', old, 3000, 'old');
      await seed('dropme', clock.now(), 3000, 'any');
      expect((await first.request('DELETE', '/v1/tenants/dropme')).status).toBe(204);

      const cut = await first.app.get(RetentionService).runOnce({ maxBatches: 3, batchRows: 1000 });
      expect(cut?.more).toBe(true);
      expect(cut?.swept).toBe(3000);
      await first.close();

      second = await startTestApp({
        sandbox: true,
        clock,
        databaseUrl,
        env: { VAULT_KEYS: vaultKeys, OPERATOR_API_KEY: first.operatorKey },
      });
      for (let i = 0; i < 20; i++) {
        const run = await second.app.get(RetentionService).runOnce({ maxBatches: 3, batchRows: 1000 });
        if (run && !run.more) break;
      }
      const count = async (tenantId: string, type: string) =>
        Number(
          (await second!.db.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE tenant_id = $1 AND type = $2`, [tenantId, type]))
            .rows[0].n,
        );
      expect(await count('sweepme', 'old')).toBe(0);
      expect(await count('sweepme', 'new')).toBe(100);
      expect(await count('keepme', 'old')).toBe(3000);
      expect(await count('dropme', 'any')).toBe(0);
      expect((await second.db.query(`SELECT 1 FROM tenants WHERE id = 'dropme'`)).rowCount).toBe(0);
      expect((await second.request('GET', '/v1/tenants/keepme')).status).toBe(200);
    } finally {
      await second?.close();
    }
  });
});
