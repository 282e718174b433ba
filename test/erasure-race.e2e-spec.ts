import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EventDeliveryService } from '../src/events/event-delivery.service.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const TENANT = 'erasing';
const ROUNDS = 4;
/** Inbound deliveries per round, half of them naming the user being erased, sent 4 at a time through the erasure. */
const DELIVERIES = 40;

/**
 * An erasure (DELETE /v1/tenants/{id}/users/{userId}) racing the events pipeline (docs/data-retention.md, "Erasure"):
 * while the user's connection.created is on its way to the partner (the partner holds its answer until the erasure
 * has answered) and inbound deliveries naming the user and another one keep arriving through /inbound. Nothing of
 * the user is left (connections, sessions, the events erasure attributes to them and their attempts, audit rows naming
 * them), and every inbound delivery is stored and forwarded once.
 */
describe("an erasure racing inbound deliveries and the deliveries of the user's own events", () => {
  let t: TestApp;
  let sink: WebhookSink;
  const receiverId = randomUUID();
  const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
  /** Released once the erasure of that user has answered: the partner's answer to the user's connection.created waits. */
  const gates = new Map<string, { open: () => void; opened: Promise<void> }>();

  beforeAll(async () => {
    t = await startTestApp({
      env: { EVENTS_RELAY_INTERVAL_MS: '100', EVENTS_POLL_INTERVAL_MS: '500', EVENTS_MAINTENANCE_SECONDS: '1' },
    });
    sink = await WebhookSink.start();
    sink.wait = (_n, d) => {
      const data = d.body.data as { userId?: unknown };
      return d.body.type === 'connection.created' ? (gates.get(String(data.userId))?.opened ?? null) : null;
    };
    await newTenant(t, TENANT, { eventsTargetUrl: sink.url });
    // The receiver a self-targeted provisioning would create (provisioning itself: webhooks.e2e-spec.ts).
    const sealed = await t.app
      .get(TokenVault)
      .seal(authorization, { table: 'webhook_receivers', id: receiverId, column: 'secret_enc', tenantId: TENANT });
    await t.db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, 'bearer', $3)`, [
      receiverId,
      TENANT,
      sealed,
    ]);
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  const count = async (sql: string, params: unknown[] = []): Promise<number> =>
    Number((await t.db.query<{ n: string }>(sql, params)).rows[0].n);

  /** Inbound deliveries, `DELIVERIES` of them 4 at a time; answers the acknowledged event ids. */
  async function inbound(round: number, named: [string, string]): Promise<string[]> {
    const acked: string[] = [];
    let next = 0;
    const worker = async () => {
      for (let seq = next++; seq < DELIVERIES; seq = next++) {
        const res = await fetch(`${t.url}/inbound/${TENANT}/${receiverId}`, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/json' },
          body: JSON.stringify({ event: 'workflow_step_updated', round, seq, transition: 'Review', userId: named[seq % 2] }),
        });
        expect(res.status).toBe(200);
        acked.push(((await res.json()) as { id: string }).id);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    return acked;
  }

  it('leaves nothing of the user, loses no delivery and forwards each once', async () => {
    const acked: string[] = [];
    const victims: string[] = [];
    const keepers: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const victim = `victim-${round}`;
      const keeper = `keeper-${round}`;
      victims.push(victim);
      keepers.push(keeper);
      let open!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      gates.set(victim, { open, opened });
      expect((await connectViaHttp(t, TENANT, { userId: victim, as: 'alice' })).status).toBe('connected');
      expect((await connectViaHttp(t, TENANT, { userId: keeper, as: 'bob' })).status).toBe('connected');
      t.app.get(EventDeliveryService).kick();
      const stream = inbound(round, [victim, keeper]);
      // The user's connection.created is at the partner, its answer held: the attempt runs while the user is erased.
      await waitUntil(`${victim}'s connection.created at the partner`, () =>
        sink.received.some((d) => d.body.type === 'connection.created' && (d.body.data as { userId: string }).userId === victim),
      );
      const erased = await t.request('DELETE', `/v1/tenants/${TENANT}/users/${victim}`);
      expect(erased.status).toBe(204);
      open();
      acked.push(...(await stream));
    }

    // Everything settles: every acknowledged delivery at the partner, no job left, nothing pending.
    const accepted = () => new Set(sink.accepted().map((d) => String(d.headers['webhook-id'])));
    await waitUntil('every acknowledged delivery at the partner', () => acked.every((id) => accepted().has(id)), 60_000, 200);
    await waitUntil(
      'no delivery job or pending event left',
      async () =>
        (await count(`SELECT count(*) AS n FROM pgboss.job WHERE name = 'events-deliver' AND state IN ('created', 'retry', 'active')`)) +
          (await count(`SELECT count(*) AS n FROM events WHERE tenant_id = $1 AND delivery_state = 'pending'`, [TENANT])) ===
        0,
      60_000,
      200,
    );

    let left = 0;
    for (const v of victims) {
      left += await count(`SELECT count(*) AS n FROM connections WHERE tenant_id = $1 AND user_id = $2`, [TENANT, v]);
      left += await count(`SELECT count(*) AS n FROM connect_sessions WHERE tenant_id = $1 AND user_id = $2`, [TENANT, v]);
      // The events erasure attributes to the user: the service's own about their connections.
      left += await count(
        `SELECT count(*) AS n FROM events WHERE tenant_id = $1 AND (user_id = $2 OR (source = 'service' AND payload->>'userId' = $2))`,
        [TENANT, v],
      );
      left += await count(`SELECT count(*) AS n FROM audit_log WHERE row_to_json(audit_log)::text LIKE '%' || $1 || '%'`, [v]);
    }
    // No attempt outlives its event: the attempts of the user's events went with them, even those in flight.
    const orphanAttempts = await count(
      `SELECT count(*) AS n FROM event_attempts a WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id)`,
    );
    const stored = await count(`SELECT count(*) AS n FROM events WHERE id = ANY($1::uuid[])`, [acked]);
    const perId = new Map<string, number>();
    for (const d of sink.received) perId.set(String(d.headers['webhook-id']), (perId.get(String(d.headers['webhook-id'])) ?? 0) + 1);
    const forwardedTwice = [...perId.values()].filter((n) => n > 1).length;
    const keptConnections = await count(`SELECT count(*) AS n FROM connections WHERE tenant_id = $1 AND user_id = ANY($2::text[])`, [
      TENANT,
      keepers,
    ]);
    const userErased = sink.accepted().filter((d) => d.body.type === 'user.erased').length;
    const inFlightAtErasure = victims.filter((v) =>
      sink.received.some((d) => d.body.type === 'connection.created' && (d.body.data as { userId: string }).userId === v),
    ).length;
    console.log(
      `erasure racing deliveries: ${ROUNDS} users erased while their connection.created was at the partner (${inFlightAtErasure}) and ` +
        `${acked.length} inbound deliveries arrived; ${left} rows of the erased users left, ${orphanAttempts} attempts without their event; ` +
        `${stored} of ${acked.length} deliveries stored, ${acked.filter((id) => accepted().has(id)).length} forwarded, ${forwardedTwice} events forwarded twice; ` +
        `${keptConnections} of ${keepers.length} other users' connections kept; ${userErased} user.erased delivered`,
    );
    expect(inFlightAtErasure).toBe(ROUNDS);
    expect(left).toBe(0);
    expect(orphanAttempts).toBe(0);
    expect(stored).toBe(acked.length);
    expect(acked.length).toBe(ROUNDS * DELIVERIES);
    expect(forwardedTwice).toBe(0);
    expect(keptConnections).toBe(keepers.length);
    expect(userErased).toBe(ROUNDS);
  }, 180_000);
});
