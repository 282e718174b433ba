import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitUntil, WebhookSink } from '../support/webhook-sink.js';
import { deliver, newReceiver } from './support.js';

/**
 * The same upstream delivery posted several times (docs/webhooks.md, "De-duplicating upstream deliveries"):
 * each is stored and forwarded under its own webhook-id (nothing is dropped: the upstream shows no delivery
 * id), and each carries the same `payloadDigest` (SHA-256 of the body as received, base64url) in the events
 * API and as `cws-payload-digest` on the delivery, for the partner to de-duplicate on.
 */

interface Event {
  id: string;
  source: string;
  payloadDigest: string | null;
}

describe('payload digest of upstream deliveries', () => {
  let t: TestApp;
  let sink: WebhookSink;

  beforeAll(async () => {
    sink = await WebhookSink.start();
    t = await startTestApp({ env: { LOG_LEVEL: 'warn' } });
    await newTenant(t, 'acme', { eventsTargetUrl: sink.url });
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  it('gives the same delivery posted six times six events with one digest, and another delivery another', async () => {
    const receiver = await newReceiver(t, 'acme');
    const body = '{"event": "workflow_step_updated", "data": {"workflowId": "w-1", "step": 2}}';
    const digest = createHash('sha256').update(body, 'utf8').digest('base64url');
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await deliver(t, receiver, body)).body.id);
    const other = (await deliver(t, receiver, '{"event": "workflow_step_updated", "data": {"workflowId": "w-1", "step": 3}}')).body.id;
    expect(new Set(ids).size).toBe(6);

    // A page holds only rows below the oldest transaction still open (docs/webhooks.md, "the mark"): an acknowledged
    // event is listed once the transactions that began before its own have ended, a moment later on a busy database.
    const byId = await waitUntil('the seven events listed', async () => {
      const listed = await t.request<{ events: Event[] }>('GET', '/v1/tenants/acme/events?limit=50');
      const events = new Map(listed.body.events.map((e) => [e.id, e]));
      return [...ids, other].every((id) => events.has(id)) ? events : null;
    });
    for (const id of ids) expect(byId.get(id)?.payloadDigest).toBe(digest);
    expect(byId.get(other)?.payloadDigest).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(byId.get(other)?.payloadDigest).not.toBe(digest);

    await waitUntil('seven deliveries', () => sink.accepted().length >= 7);
    const delivered = sink.accepted().filter((d) => ids.includes(String(d.headers['webhook-id'])));
    expect(delivered).toHaveLength(6);
    expect(new Set(delivered.map((d) => d.headers['webhook-id'])).size).toBe(6);
    for (const d of delivered) expect(d.headers['cws-payload-digest']).toBe(digest);
  });
});
