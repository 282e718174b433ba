import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { connectViaHttp } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { verifySignature, waitUntil, WebhookSink } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface SandboxWebhook {
  id: string;
  events: string[];
  targetURL: string;
  headers: Record<string, string>;
}
interface EventItem {
  id: string;
  receivedAt: string;
  type: string;
  payload: Record<string, unknown>;
  source: string;
  delivery: { state: string; attempts: number; lastError: string | null; deliveredAt: string | null };
}
interface EventPage {
  events: EventItem[];
  next: string | null;
}

describe('webhooks: provisioning, inbound deliveries, signed forwarding (API.md section 8)', () => {
  let t: TestApp;
  let sink: WebhookSink;
  let secret: string;

  async function tenant(id: string, over: Record<string, unknown> = {}): Promise<string> {
    const res = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants', {
      body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], ...over },
    });
    expect(res.status).toBe(201);
    return res.body.eventsSecret;
  }

  /** The Authorization a receiver expects, read the way the app reads it (tests only). */
  async function receiverAuthorization(receiverId: string): Promise<string> {
    const row = await t.db.query<{ secret_enc: string; tenant_id: string }>(
      'SELECT secret_enc, tenant_id FROM webhook_receivers WHERE id = $1',
      [receiverId],
    );
    const ref = { table: 'webhook_receivers', id: receiverId, column: 'secret_enc', tenantId: row.rows[0].tenant_id };
    return t.app.get(TokenVault).open(row.rows[0].secret_enc, ref);
  }

  async function webhookCalls(): Promise<number> {
    return t.sandbox!.records().filter((r) => r.path === '/webhooks').length;
  }

  let receiverPath = '';

  beforeAll(async () => {
    sink = await WebhookSink.start();
    t = await startTestApp({
      env: {
        EVENTS_RETRY_BASE_MS: '100',
        EVENTS_RETRY_MAX_MS: '400',
        EVENTS_RETRY_SPAN_MS: '2500',
        EVENTS_POLL_INTERVAL_MS: '500',
        EVENTS_RELAY_INTERVAL_MS: '100',
        EVENTS_MAINTENANCE_SECONDS: '1',
      },
    });
    secret = await tenant('acme', { eventsTargetUrl: sink.url });
    const admin = await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    expect(admin.status).toBe('connected');
  });
  afterAll(async () => {
    await t?.close();
    await sink?.close();
  });

  it('provisions a self-targeted webhook through the admin connection, Authorization redacted', async () => {
    const res = await t.request<SandboxWebhook>('POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated', 'workflow_attribute_updated'] },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-upstream-status')).toBe('201');
    expect(res.body.headers.Authorization).toBe('[REDACTED]');
    const target = new URL(res.body.targetURL);
    expect(`${target.origin}`).toBe(t.config.publicUrl);
    const match = /^\/inbound\/acme\/([0-9a-f-]{36})$/.exec(target.pathname);
    expect(match).not.toBeNull();
    receiverPath = target.pathname;
    const receiverId = match![1];
    const authorization = await receiverAuthorization(receiverId);
    expect(authorization).toMatch(/^Bearer [A-Za-z0-9_-]{43}$/); // 256 bits
    expect(res.text).not.toContain(authorization.slice(7));
    const row = await t.db.query<{ secret_enc: string; auth_method: string }>(
      'SELECT secret_enc, auth_method FROM webhook_receivers WHERE id = $1',
      [receiverId],
    );
    expect(row.rows[0].auth_method).toBe('bearer');
    expect(row.rows[0].secret_enc).not.toContain(authorization.slice(7));
    expect(t.logs.join('')).not.toContain(authorization.slice(7));
    const calls = t.sandbox!.records().filter((r) => r.path === '/webhooks');
    expect(calls.every((c) => c.tokenUserId === 'admin')).toBe(true);
  });

  it('apiKey and basic put the secret the way spec 5.2 says', async () => {
    const apiKey = await t.request<SandboxWebhook>('POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated'], auth: 'apiKey' },
    });
    expect(apiKey.status).toBe(201);
    const keyValue = await receiverAuthorization(apiKey.body.targetURL.split('/').at(-1)!);
    expect(keyValue).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const basic = await t.request<SandboxWebhook>('POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['workflow_step_updated'], auth: 'basic' },
    });
    expect(basic.status).toBe(201);
    const basicValue = await receiverAuthorization(basic.body.targetURL.split('/').at(-1)!);
    const [scheme, b64] = basicValue.split(' ');
    expect(scheme).toBe('Basic');
    expect(Buffer.from(b64, 'base64').toString('utf8')).toMatch(/^cws-connect:[A-Za-z0-9_-]{43}$/);
  });

  it('a workflow step change in the sandbox reaches the partner, signed with the tenant secret', async () => {
    const alice = t.sandbox!.issueTokens('alice').access_token;
    const created = await fetch(`${t.sandbox!.url}/workflows`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'NDA', approvers: ['alice'] }),
    });
    expect(created.status).toBe(201);
    const workflow = (await created.json()) as { id: string };
    t.sandbox!.setWorkflowStep(workflow.id, 'Review');

    const delivery = await waitUntil('the forwarded step event', () =>
      sink.received.find(
        (d) => d.body.type === 'workflow_step_updated' && (d.body.data as { workflowId?: string }).workflowId === workflow.id,
      ),
    );
    expect(verifySignature(secret, delivery.headers, delivery.raw)).toBe(true);
    expect(verifySignature(`whsec_${Buffer.alloc(32).toString('base64')}`, delivery.headers, delivery.raw)).toBe(false);
    expect(delivery.body.data).toMatchObject({ event: 'workflow_step_updated', transition: 'Review' });
    expect(Math.abs(Number(delivery.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);

    const page = await t.request<EventPage>('GET', '/v1/tenants/acme/events?limit=500');
    const stored = page.body.events.find((e) => e.id === delivery.headers['webhook-id']);
    expect(stored).toMatchObject({ type: 'workflow_step_updated', source: 'upstream' });
    await waitUntil('delivered state', async () => {
      const again = await t.request<EventPage>('GET', '/v1/tenants/acme/events?limit=500');
      return again.body.events.find((e) => e.id === stored!.id)?.delivery.state === 'delivered';
    });
  });

  it("the service's own connection.created event is forwarded the same way", async () => {
    const d = await waitUntil('connection.created', () => sink.received.find((x) => x.body.type === 'connection.created'));
    expect(verifySignature(secret, d.headers, d.raw)).toBe(true);
  });

  it('a wrong or missing Authorization on /inbound gets 401 and nothing is stored or forwarded', async () => {
    // A marker of its own: other events (connection.*, late sandbox deliveries) may be stored meanwhile.
    const probe = randomUUID();
    const body = JSON.stringify({ event: 'workflow_step_updated', transition: 'Sign', probe });
    const variants: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: (await receiverAuthorization(receiverPath.split('/').at(-1)!)) + 'x' },
    ];
    for (const headers of variants) {
      const res = await fetch(`${t.url}${receiverPath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      expect(res.status).toBe(401);
      const err = (await res.json()) as ErrorBody;
      expect(err.error.code).toBe('unauthorized');
      expect(err.error.requestId).toBeTruthy();
    }
    const unknown = await fetch(`${t.url}/inbound/acme/00000000-0000-4000-8000-000000000000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
      body,
    });
    expect(unknown.status).toBe(401);
    const otherTenant = await fetch(`${t.url}/inbound/nobody/${receiverPath.split('/').at(-1)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: await receiverAuthorization(receiverPath.split('/').at(-1)!) },
      body,
    });
    expect(otherTenant.status).toBe(401);
    await new Promise((r) => setTimeout(r, 700));
    const stored = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE payload->>'probe' = $1`, [probe]);
    expect(stored.rows[0].n).toBe(0);
    expect(sink.received.filter((d) => JSON.stringify(d.body).includes(probe))).toHaveLength(0);
  });

  it('an accepted delivery is stored before the 2xx; type from event/type/eventType, else unknown', async () => {
    const authorization = await receiverAuthorization(receiverPath.split('/').at(-1)!);
    const post = (payload: unknown) =>
      fetch(`${t.url}${receiverPath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify(payload),
      });
    const cases: Array<[unknown, string]> = [
      [{ event: 'workflow_attribute_updated' }, 'workflow_attribute_updated'],
      [{ type: 'x.y' }, 'x.y'],
      [{ eventType: 'z' }, 'z'],
      [{ nothing: true }, 'unknown'],
      [[1, 2], 'unknown'],
    ];
    for (const [payload, type] of cases) {
      const res = await post(payload);
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      const row = await t.db.query<{ type: string; source: string; payload: unknown }>(
        'SELECT type, source, payload FROM events WHERE id = $1',
        [id],
      );
      expect(row.rows[0]).toEqual({ type, source: 'upstream', payload });
    }
    const big = await fetch(`${t.url}${receiverPath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify({ pad: 'x'.repeat(1_100_000) }),
    });
    expect(big.status).toBe(413);
  });

  it('validation: events, targetURL and headers; nothing is sent upstream', async () => {
    const before = await webhookCalls();
    const bad: unknown[] = [
      {},
      { events: [] },
      { events: [1] },
      { events: 'workflow_step_updated' },
      { events: ['e'], targetURL: 'http://example.com/hook' },
      { events: ['e'], targetURL: 'ftp://example.com/hook' },
      { events: ['e'], targetURL: 'not a url' },
      { events: ['e'], headers: { 'X-Num': 1 } },
      { events: ['e'], headers: 'x' },
      { events: ['e'], headers: { 'bad name': 'v' } },
      { events: ['e'], auth: 'digest' },
      { events: ['e'], headers: { authorization: 'Bearer mine' } },
      { events: ['e'], targetURL: 'https://partner.example/hook', auth: 'basic' },
      { events: ['e'], extra: true },
    ];
    for (const body of bad) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants/acme/webhooks', { body });
      expect([res.status, res.body.error?.code, JSON.stringify(body)]).toEqual([400, 'validation_failed', JSON.stringify(body)]);
    }
    expect(await webhookCalls()).toBe(before);
  });

  it('with targetURL: passed as given (localhost allowed outside production), the answer and the list redacted', async () => {
    const given = {
      events: ['workflow_step_updated'],
      targetURL: 'http://localhost:9/partner',
      headers: { Authorization: 'Bearer partner-own-secret-123', 'X-Env': 'test' },
    };
    const res = await t.request<SandboxWebhook>('POST', '/v1/tenants/acme/webhooks', { body: given });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ targetURL: given.targetURL, headers: { Authorization: '[REDACTED]', 'X-Env': 'test' } });
    expect(res.text).not.toContain('partner-own-secret-123');
    const https = await t.request<SandboxWebhook>('POST', '/v1/tenants/acme/webhooks', {
      body: { events: ['e'], targetURL: 'https://partner.example/hook', headers: { authorization: 'k' } },
    });
    expect(https.status).toBe(201);
    expect(https.body.headers.authorization).toBe('[REDACTED]');

    const list = await t.request<{ webhooks: SandboxWebhook[] }>('GET', '/v1/tenants/acme/webhooks');
    expect(list.status).toBe(200);
    expect(list.headers.get('x-upstream-status')).toBe('200');
    expect(list.body.webhooks.length).toBeGreaterThanOrEqual(5);
    for (const w of list.body.webhooks) {
      for (const [name, value] of Object.entries(w.headers)) if (name.toLowerCase() === 'authorization') expect(value).toBe('[REDACTED]');
    }
    expect(list.text).not.toContain('partner-own-secret-123');
  });

  it('a non-admin token never reaches the webhook endpoints: 409 admin_not_connected', async () => {
    await tenant('beta');
    const none = await t.request<ErrorBody>('GET', '/v1/tenants/beta/webhooks');
    expect([none.status, none.body.error.code]).toEqual([409, 'admin_not_connected']);
    const carol = await connectViaHttp(t, 'beta', { kind: 'admin', as: 'carol' });
    expect(carol.error).toBe('not_admin');
    t.sandbox!.clearRecords();
    const create = await t.request<ErrorBody>('POST', '/v1/tenants/beta/webhooks', { body: { events: ['workflow_step_updated'] } });
    expect([create.status, create.body.error.code]).toEqual([409, 'admin_not_connected']);
    const list = await t.request<ErrorBody>('GET', '/v1/tenants/beta/webhooks');
    expect([list.status, list.body.error.code]).toEqual([409, 'admin_not_connected']);
    expect(t.sandbox!.records().filter((r) => r.path === '/webhooks')).toEqual([]);
    const receivers = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_receivers WHERE tenant_id = 'beta'`);
    expect(receivers.rows[0].n).toBe(0);
  });

  it('an upstream refusal removes the receiver row and is passed through', async () => {
    const before = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_receivers WHERE tenant_id = 'acme'`);
    t.sandbox!.setFault({ mode: 'status', status: 503, paths: ['/webhooks'], count: 1 });
    const res = await t.request<{ error: string }>('POST', '/v1/tenants/acme/webhooks', { body: { events: ['workflow_step_updated'] } });
    expect(res.status).toBe(503);
    expect(res.headers.get('x-upstream-status')).toBe('503');
    const after = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_receivers WHERE tenant_id = 'acme'`);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('tenant isolation: another tenant key cannot list or provision', async () => {
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/beta/api-keys', { body: {} });
    const list = await t.request<ErrorBody>('GET', '/v1/tenants/acme/webhooks', { key: key.body.key });
    expect([list.status, list.body.error.code]).toEqual([404, 'tenant_not_found']);
    const events = await t.request<ErrorBody>('GET', '/v1/tenants/acme/events', { key: key.body.key });
    expect([events.status, events.body.error.code]).toEqual([404, 'tenant_not_found']);
  });

  it('the events API pages with an opaque cursor and validates after and limit', async () => {
    const all: EventItem[] = [];
    let after: string | null = null;
    for (let i = 0; i < 50; i++) {
      const page: { status: number; body: EventPage } = await t.request<EventPage>(
        'GET',
        `/v1/tenants/acme/events?limit=2${after ? `&after=${after}` : ''}`,
      );
      expect(page.status).toBe(200);
      expect(page.body.events.length).toBeLessThanOrEqual(2);
      all.push(...page.body.events);
      if (page.body.events.length === 0) {
        expect(page.body.next).toBe(after);
        break;
      }
      after = page.body.next;
    }
    const whole = await t.request<EventPage>('GET', '/v1/tenants/acme/events?limit=500');
    expect(all.map((e) => e.id)).toEqual(whole.body.events.map((e) => e.id));
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    expect(whole.body.events[0]).toEqual({
      id: expect.any(String),
      receivedAt: expect.any(String),
      type: expect.any(String),
      payload: expect.anything(),
      source: expect.any(String),
      // An upstream delivery's SHA-256 (base64url); null for the service's own events.
      payloadDigest: (whole.body.events[0] as { source?: string }).source === 'upstream' ? expect.stringMatching(/^[\w-]{43}$/) : null,
      delivery: { state: expect.any(String), attempts: expect.any(Number), lastError: null, deliveredAt: expect.any(String) },
    });
    for (const q of ['limit=0', 'limit=501', 'limit=abc', 'after=xyz', 'after=' + Buffer.from('s-1').toString('base64url'), 'after=%00']) {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/acme/events?${q}`);
      expect([q, res.status, res.body.error.code]).toEqual([q, 400, 'validation_failed']);
    }
    const unknownTenant = await t.request<ErrorBody>('GET', '/v1/tenants/nope/events');
    expect(unknownTenant.status).toBe(404);
  });

  it('an event the partner keeps refusing is retried with backoff, then dead-lettered and listed as dead', async () => {
    const failing = await WebhookSink.start();
    failing.respond = () => 500;
    try {
      await tenant('gamma', { eventsTargetUrl: failing.url });
      await connectViaHttp(t, 'gamma', { kind: 'admin', as: 'admin' });
      const dead = await waitUntil(
        'a dead event',
        async () => (await t.request<EventPage>('GET', '/v1/tenants/gamma/events')).body.events.find((e) => e.delivery.state === 'dead'),
        15_000,
        200,
      );
      expect(dead.delivery.attempts).toBeGreaterThan(2);
      expect(dead.delivery.lastError).toBe('http_500');
      expect(dead.delivery.deliveredAt).toBeNull();
      const ids = new Set(failing.received.filter((d) => d.body.type === dead.type).map((d) => d.headers['webhook-id']));
      expect([...ids]).toEqual([dead.id]);
      expect(failing.received.length).toBe(dead.delivery.attempts);
      const timestamps = failing.received.map((d) => Number(d.headers['webhook-timestamp']));
      expect(timestamps[timestamps.length - 1] - timestamps[0]).toBeGreaterThanOrEqual(2);
    } finally {
      await failing.close();
    }
  });
});
