import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EventDeliveryService } from '../src/events/event-delivery.service.js';
import { EventsRepository } from '../src/events/events.repository.js';
import { newTenant } from './support/connect.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const EVENTS = 12;
/** The partner's answer takes this long: longer than a delivery job may stay active (1 s). */
const PARTNER_MS = 4000;
const ENV = {
  EVENTS_JOB_EXPIRE_SECONDS: '1',
  EVENTS_MAINTENANCE_SECONDS: '1',
  EVENTS_POLL_INTERVAL_MS: '500',
  EVENTS_RELAY_INTERVAL_MS: '100',
  EVENTS_ATTEMPT_TIMEOUT_MS: '10000',
};

/**
 * Starved delivery workers (docs/webhooks.md, "One attempt at a time"): the partner answers after 4 s while a
 * delivery job may stay active 1 s, so the job queue fails every batch back while its attempts still run, and
 * offers the jobs again to the other workers of both instances. The fence on each event's delivery row lets none of
 * them forward an event whose attempt is still running: every event reaches the partner once.
 */
describe('a delivery handler that outlives its job (two instances, a slow partner)', () => {
  let a: TestApp;
  let b: TestApp;
  let sink: WebhookSink;

  beforeAll(async () => {
    a = await startTestApp({ env: ENV });
    b = await startSecondInstance(a, ENV);
    sink = await WebhookSink.start();
    sink.wait = () => new Promise((r) => setTimeout(r, PARTNER_MS));
    await newTenant(a, 'starved', { eventsTargetUrl: sink.url });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await sink?.close();
  });

  it('forwards each event once although its job expired while the partner took its time', async () => {
    const events = a.app.get(EventsRepository);
    for (let i = 0; i < EVENTS; i++)
      await events.record({ tenantId: 'starved', source: 'upstream', type: 'workflow_step_updated', payload: { seq: i } });
    a.app.get(EventDeliveryService).kick();
    const delivered = async () =>
      Number(
        (await a.db.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE tenant_id = 'starved' AND delivery_state = 'delivered'`))
          .rows[0].n,
      );
    await waitUntil('every event delivered', async () => (await delivered()) === EVENTS, 45_000, 200);
    // Every job the queue failed back meanwhile has run again (and, its attempt running, waited for the lease to end).
    const jobsLeft = async () =>
      Number(
        (
          await a.db.query<{ n: string }>(
            `SELECT count(*) AS n FROM pgboss.job WHERE name = 'events-deliver' AND state IN ('created', 'retry', 'active')`,
          )
        ).rows[0].n,
      );
    await waitUntil('every delivery job finished', async () => (await jobsLeft()) === 0, 60_000, 250);

    const perId = new Map<string, number>();
    for (const d of sink.received) perId.set(String(d.headers['webhook-id']), (perId.get(String(d.headers['webhook-id'])) ?? 0) + 1);
    const forwardedTwice = [...perId.values()].filter((n) => n > 1).length;
    const metrics = (await Promise.all([a, b].map(async (t) => (await t.request('GET', '/metrics', { key: null })).text))).join('\n');
    const sum = (outcome: string) =>
      metrics
        .split('\n')
        .filter((l) => l.startsWith(`cws_event_delivery_fence_total{outcome="${outcome}"}`))
        .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    const jobsExpired = Number(
      (await a.db.query<{ n: string }>(`SELECT count(*) AS n FROM pgboss.job WHERE name = 'events-deliver' AND retry_count > 0`)).rows[0].n,
    );
    console.log(
      `starved workers: ${EVENTS} events, partner ${PARTNER_MS} ms per answer, jobs expire after 1 s; ${sink.received.length} partner requests, ` +
        `${perId.size} distinct webhook-ids, ${forwardedTwice} events forwarded twice; ${jobsExpired} jobs offered again after expiring; ` +
        `fence: ${sum('claimed')} attempts claimed, ${sum('held')} jobs found their event's attempt running and waited, ${sum('lost')} attempts outlived their lease`,
    );
    expect(perId.size).toBe(EVENTS);
    expect(forwardedTwice).toBe(0);
    // The starvation was real: jobs were failed back and offered again while their attempts ran.
    expect(jobsExpired).toBeGreaterThan(0);
    expect(sum('held')).toBeGreaterThan(0);
    expect(sum('lost')).toBe(0);
    // Each event was claimed by one attempt only.
    expect(sum('claimed')).toBe(EVENTS);
  }, 120_000);
});
