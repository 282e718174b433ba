import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitUntil, WebhookSink } from '../support/webhook-sink.js';
import { deliver, expectError, newReceiver } from './support.js';

/**
 * SSRF through the events target (docs/security.md, "Events target"). In production an internal target is
 * refused when it is written (`422 target_not_allowed`, nothing changed), and a target that reaches an
 * internal address anyway (a row written before this rule, or a name that resolves there) is refused at
 * connect time and recorded as a plain `network` failure, the same as any unreachable host, so the attempts
 * log tells nothing about internal ports. The operator's EVENTS_TARGET_ALLOW_PRIVATE lets one through.
 */

const INTERNAL_TARGETS = [
  'https://127.0.0.1/hook',
  'https://[::1]/hook',
  'https://[::ffff:127.0.0.1]/hook',
  'https://0.0.0.0/hook',
  'https://localhost/hook',
  'https://169.254.169.254/latest/meta-data/',
  'https://metadata.google.internal/computeMetadata/v1/',
  'https://10.0.0.1/hook',
  'https://172.16.0.1/hook',
  'https://192.168.1.1/hook',
  'https://100.64.0.1/hook',
  'https://[fc00::1]/hook',
  'https://[fe80::1]/hook',
  'https://[ff02::1]/hook',
  'https://intranet/hook',
];

interface Attempt {
  status: number | null;
  error: string | null;
}

async function productionApp(env: Record<string, string> = {}): Promise<TestApp> {
  return startTestApp({ env: { NODE_ENV: 'production', LOG_LEVEL: 'warn', EVENTS_RETRY_BASE_MS: '600000', ...env } });
}

/** An upstream delivery stored for the tenant, then the attempts of its forwarding, once one is recorded. */
async function firstAttempts(t: TestApp, tenantId: string): Promise<Attempt[]> {
  const receiver = await newReceiver(t, tenantId);
  const stored = await deliver(t, receiver, JSON.stringify({ event: 'workflow_step_updated', data: { id: 'w1' } }));
  expect(stored.status).toBe(200);
  return waitUntil('a delivery attempt', async () => {
    const res = await t.request<{ attempts: Attempt[] }>('GET', `/v1/tenants/${tenantId}/events/${stored.body.id}/attempts`);
    return res.body.attempts.length > 0 ? res.body.attempts : null;
  });
}

describe('events targets in production', () => {
  let t: TestApp;
  let sink: WebhookSink;

  beforeAll(async () => {
    sink = await WebhookSink.start();
    t = await productionApp();
    await newTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  it('refuses an internal target when a tenant is created or changed, and changes nothing', async () => {
    for (const [i, target] of INTERNAL_TARGETS.entries()) {
      const created = await t.request('POST', '/v1/tenants', {
        body: { id: `t${i}`, name: 'x', environment: 'sandbox', allowedReturnUrls: ['https://app.example/'], eventsTargetUrl: target },
      });
      expectError(created, 422, 'target_not_allowed', `create with ${target}`);
      const patched = await t.request('PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: target } });
      expectError(patched, 422, 'target_not_allowed', `patch to ${target}`);
    }
    // A decimal or hex host is no URL to class-validator's IsUrl: refused before the rule (the WHATWG parser reads 127.0.0.1).
    const decimal = await t.request('PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: 'https://2130706433/hook' } });
    expectError(decimal, 400, 'validation_failed', 'decimal loopback');
    expect((await t.db.query(`SELECT id FROM tenants WHERE id <> 'acme'`)).rows).toEqual([]);
    expect((await t.db.query(`SELECT events_target_url FROM tenants WHERE id = 'acme'`)).rows).toEqual([{ events_target_url: null }]);
    const ok = await t.request('PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: 'https://hooks.partner.example/in' } });
    expect(ok.status).toBe(200);
  });

  it('refuses at connect time a stored target that reaches loopback, by address or by name, as a plain network failure', async () => {
    const port = new URL(sink.url).port;
    for (const target of [sink.url, `http://localhost:${port}/cws-events`, `http://[::ffff:127.0.0.1]:${port}/cws-events`]) {
      // As a row written before this rule: the write-time check is not what stops it.
      await t.db.query(`UPDATE tenants SET events_target_url = $1 WHERE id = 'acme'`, [target]);
      expect([target, await firstAttempts(t, 'acme')]).toEqual([target, [expect.objectContaining({ status: null, error: 'network' })]]);
    }
    expect(sink.received).toEqual([]);
    expect(t.logs.join('')).toContain('the events target resolves to an address that is not allowed');
    expect(t.logs.join('')).not.toContain(port);
  });
});

describe("the operator's allow-list in production", () => {
  let t: TestApp;
  let sink: WebhookSink;

  beforeAll(async () => {
    sink = await WebhookSink.start();
    t = await productionApp({ EVENTS_TARGET_ALLOW_PRIVATE: '127.0.0.1/32, hooks.corp.example' });
    await newTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  it('lets a listed range and name be written, and delivers to a listed address', async () => {
    for (const target of ['https://127.0.0.1/hook', 'https://hooks.corp.example/in']) {
      expect((await t.request('PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: target } })).status).toBe(200);
    }
    expectError(
      await t.request('PATCH', '/v1/tenants/acme', { body: { eventsTargetUrl: 'https://10.0.0.1/' } }),
      422,
      'target_not_allowed',
      '10/8',
    );
    await t.db.query(`UPDATE tenants SET events_target_url = $1 WHERE id = 'acme'`, [sink.url]);
    expect(await firstAttempts(t, 'acme')).toEqual([expect.objectContaining({ status: 200, error: null })]);
    expect(sink.accepted()).toHaveLength(1);
  });
});
