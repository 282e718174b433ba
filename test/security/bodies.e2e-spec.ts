import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JSON_MAX_DEPTH } from '../../src/common/json-body.js';
import { newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { count, deliver, expectError, nestedArrays, nestedObjects, newReceiver, newTenantKey, type Receiver } from './support.js';

/**
 * Bad bytes at the edge: NUL (PostgreSQL's text and jsonb refuse it), unpaired surrogate escapes (jsonb
 * refuses them) and nesting beyond JSON_MAX_DEPTH (recursive validation would overflow the stack) are
 * `400 validation_failed` on every kind of route, and nothing is written.
 */

/** Raw JSON text of a value, each refused wherever a body carries it; `why` is a word of the message. */
const BAD_VALUES: Array<{ label: string; json: string; why: RegExp }> = [
  { label: 'NUL inside a string', json: '"a\\u0000b"', why: /NUL/ },
  { label: 'a string that is only NUL', json: '"\\u0000"', why: /NUL/ },
  { label: 'NUL in an array item', json: '["ok", "\\u0000"]', why: /NUL/ },
  { label: 'NUL two objects down', json: '{"x": {"y": "tail\\u0000"}}', why: /NUL/ },
  { label: 'an escaped backslash, then NUL', json: '"\\\\\\u0000"', why: /NUL/ },
  { label: 'NUL after a surrogate pair', json: '"\\ud83d\\ude00\\u0000"', why: /NUL/ },
  { label: 'a lone high surrogate', json: '"\\ud800"', why: /surrogate/ },
  { label: 'a lone high surrogate, upper-case hex', json: '"x\\uD8FF"', why: /surrogate/ },
  { label: 'a lone low surrogate', json: '"\\udc00"', why: /surrogate/ },
  { label: 'a high surrogate before a plain escape', json: '"\\ud800\\u0041"', why: /surrogate/ },
  { label: '5,000 nested arrays', json: nestedArrays(5000), why: /levels deep/ },
  { label: '5,000 nested objects', json: nestedObjects(5000), why: /levels deep/ },
  { label: '100,000 nested arrays', json: nestedArrays(100_000), why: /levels deep/ },
  { label: 'arrays and objects alternating, 3,000 levels', json: '[{"a":'.repeat(1500) + '0' + '}]'.repeat(1500), why: /levels deep/ },
  {
    label: `one level past the limit (${JSON_MAX_DEPTH} arrays inside the body's object)`,
    json: nestedArrays(JSON_MAX_DEPTH),
    why: /levels deep/,
  },
  { label: 'deep nesting hidden after a string holding brackets', json: `["]]]]", ${nestedArrays(200)}]`, why: /levels deep/ },
];

/** Bodies with a NUL in a key instead of a value. */
const BAD_KEYS = ['"k\\u0000"', '"\\u0000"', '"\\u0000\\u0000"'];

interface JsonRoute {
  label: string;
  method: string;
  path: () => string;
  key: () => string | null;
  /** The route's body with `v` (raw JSON text) in one field. */
  body: (v: string) => string;
}

describe('bad bytes get 400 validation_failed at the edge, on every kind of route', () => {
  let t: TestApp;
  let tenantKey: string;
  let receiver: Receiver;

  const routes: JsonRoute[] = [
    {
      label: 'POST /v1/tenants (operator)',
      method: 'POST',
      path: () => '/v1/tenants',
      key: () => t.operatorKey,
      body: (v) => `{"id": "bad-new", "name": ${v}, "environment": "sandbox", "allowedReturnUrls": ["http://localhost:5173/"]}`,
    },
    {
      label: 'PATCH /v1/tenants/{id} (operator)',
      method: 'PATCH',
      path: () => '/v1/tenants/acme',
      key: () => t.operatorKey,
      body: (v) => `{"name": ${v}}`,
    },
    {
      label: 'POST .../api-keys (operator)',
      method: 'POST',
      path: () => '/v1/tenants/acme/api-keys',
      key: () => t.operatorKey,
      body: (v) => `{"name": ${v}}`,
    },
    {
      label: 'POST .../connect-sessions (tenant key)',
      method: 'POST',
      path: () => '/v1/tenants/acme/connect-sessions',
      key: () => tenantKey,
      body: (v) => `{"kind": "user", "userId": ${v}, "returnUrl": "http://localhost:5173/"}`,
    },
    {
      label: 'POST .../webhooks (tenant key)',
      method: 'POST',
      path: () => '/v1/tenants/acme/webhooks',
      key: () => tenantKey,
      body: (v) => `{"events": [${v}]}`,
    },
    {
      label: 'POST /inbound/{tenant}/{receiver}',
      method: 'POST',
      path: () => receiver.path,
      key: () => null,
      body: (v) => `{"event": "workflow_step_updated", "data": ${v}}`,
    },
  ];

  async function send(route: JsonRoute, body: string) {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (route.path().startsWith('/inbound/')) headers.authorization = receiver.authorization;
    return t.request(route.method, route.path(), { key: route.key(), body, headers });
  }

  async function snapshot() {
    return {
      tenants: await count(t, 'SELECT 1 FROM tenants'),
      acme: (await t.db.query<{ name: string }>(`SELECT name FROM tenants WHERE id = 'acme'`)).rows[0].name,
      keys: await count(t, 'SELECT 1 FROM tenant_api_keys'),
      sessions: await count(t, 'SELECT 1 FROM connect_sessions'),
      events: await count(t, 'SELECT 1 FROM events'),
      upstreamWebhookCalls: t.sandbox!.records().filter((r) => r.path === '/webhooks').length,
    };
  }

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
    tenantKey = await newTenantKey(t, 'acme');
    receiver = await newReceiver(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('the routes take a clean body (the table is not refusing everything)', async () => {
    for (const route of routes.filter((r) => r.method === 'PATCH' || r.path().startsWith('/inbound/'))) {
      const res = await send(route, route.body('"clean"'));
      expect([route.label, res.status]).toEqual([route.label, 200]);
    }
  });

  it.each(routes.map((r) => [r.label, r] as const))('%s: NUL, lone surrogates and deep nesting in a value', async (_label, route) => {
    const before = await snapshot();
    for (const bad of BAD_VALUES) {
      const res = await send(route, route.body(bad.json));
      expectError(res, 400, 'validation_failed', `${route.label}: ${bad.label}`);
      expect([bad.label, (res.body as { error: { message: string } }).error.message]).toEqual([bad.label, expect.stringMatching(bad.why)]);
    }
    expect(await snapshot()).toEqual(before);
  });

  it.each(routes.map((r) => [r.label, r] as const))('%s: NUL in a key', async (_label, route) => {
    const before = await snapshot();
    for (const key of BAD_KEYS) {
      const res = await send(route, route.body('"x"').replace(/^\{/, `{${key}: 1, `));
      expectError(res, 400, 'validation_failed', `${route.label}: key ${key}`);
    }
    expect(await snapshot()).toEqual(before);
  });

  it('a form-encoded body with NUL is refused the same way', async () => {
    const before = await snapshot();
    for (const form of ['name=a%00b', 'name=%00', 'a%00=x', 'name=ok&name=%00']) {
      const res = await t.request('PATCH', '/v1/tenants/acme', {
        body: form,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expectError(res, 400, 'validation_failed', form);
    }
    expect(await snapshot()).toEqual(before);
  });

  it('the inbound receiver stores what only looks hostile, as sent', async () => {
    const good: Array<{ label: string; json: string; value: unknown }> = [
      { label: 'the text \\u0000 (escaped backslash)', json: '"\\\\u0000"', value: '\\u0000' },
      { label: 'two backslashes, then u0000', json: '"\\\\\\\\u0000"', value: '\\\\u0000' },
      { label: 'a surrogate pair', json: '"\\ud83d\\ude00"', value: '😀' },
      { label: 'U+0001', json: '"\\u0001"', value: '\u0001' },
      { label: 'brackets inside strings do not count as depth', json: `"${'['.repeat(500)}"`, value: '['.repeat(500) },
      {
        label: `exactly ${JSON_MAX_DEPTH} levels (the body's object and ${JSON_MAX_DEPTH - 1} arrays)`,
        json: nestedArrays(JSON_MAX_DEPTH - 1),
        value: JSON.parse(nestedArrays(JSON_MAX_DEPTH - 1)),
      },
    ];
    for (const g of good) {
      const res = await deliver(t, receiver, `{"event": "probe", "data": ${g.json}}`);
      expect([g.label, res.status]).toEqual([g.label, 200]);
      const row = await t.db.query<{ payload: { data: unknown } }>('SELECT payload FROM events WHERE id = $1', [res.body.id]);
      expect([g.label, row.rows[0].payload.data]).toEqual([g.label, g.value]);
    }
  });

  it('a body over the size limits is 413 payload_too_large, JSON and form alike', async () => {
    const before = await snapshot();
    const big = `{"name": "${'x'.repeat(1024 * 1024)}"}`;
    expectError(await t.request('PATCH', '/v1/tenants/acme', { body: big }), 413, 'payload_too_large', 'JSON over 1 MiB');
    expectError(await deliver(t, receiver, big), 413, 'payload_too_large', 'inbound JSON over 1 MiB');
    const form = `name=${'x'.repeat(65 * 1024)}`;
    expectError(
      await t.request('PATCH', '/v1/tenants/acme', { body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      413,
      'payload_too_large',
      'form over 64 KiB',
    );
    expect(await snapshot()).toEqual(before);
  });

  it('a body that is not an object or an array, or not JSON, is 400 as before', async () => {
    for (const body of ['"a string"', '42', 'null', '{"unterminated": ', '{"a": 1}}', "{'single': 1}"]) {
      expectError(await t.request('PATCH', '/v1/tenants/acme', { body }), 400, 'validation_failed', body);
    }
  });

  describe('path parameters and query values', () => {
    const urls: Array<[method: string, path: string]> = [
      ['GET', '/v1/tenants/%00'],
      ['GET', '/v1/tenants/acme%00'],
      ['GET', '/v1/tenants/%00acme/connections'],
      ['GET', '/v1/tenants/acme/connections/%00'],
      ['DELETE', '/v1/tenants/acme/connections/00000000-0000-4000-8000-%0000000000'],
      ['DELETE', '/v1/tenants/acme/api-keys/%00'],
      ['PATCH', '/v1/tenants/%00'],
      ['POST', '/v1/tenants/acme%00/connect-sessions'],
      ['POST', '/v1/tenants/%00/events-secret'],
      ['GET', '/v1/tenants/acme/events?after=%00'],
      ['GET', '/v1/tenants/acme/events?limit=1%00'],
      ['GET', '/v1/tenants/acme/connections?userId=%00'],
      ['GET', '/v1/tenants/%00/workflows'],
      ['GET', '/v1/tenants/%00/proxy/workflows'],
      ['GET', '/connect/%00'],
      ['GET', '/connect/abc%00def'],
      ['GET', '/oauth/callback?state=%00&code=x'],
      ['POST', '/inbound/acme%00/00000000-0000-4000-8000-000000000000'],
      ['POST', '/inbound/acme/%00'],
      // Not valid percent-encoded UTF-8: an overlong NUL, a lone continuation byte, a truncated sequence, bad hex.
      ['GET', '/v1/tenants/%C0%80'],
      ['GET', '/v1/tenants/%ff/connections'],
      ['GET', '/v1/tenants/acme/connections/%E0%A4'],
      ['GET', '/connect/%zz'],
      ['POST', '/inbound/acme/%c3'],
      ['GET', '/v1/tenants/%/connections'],
    ];

    it.each([['operator'], ['tenant key']])('%s: each is 400 validation_failed', async (who) => {
      const key = who === 'operator' ? t.operatorKey : tenantKey;
      for (const [method, path] of urls) {
        const res = await t.request(method, path, { key, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
        expectError(res, 400, 'validation_failed', `${method} ${path}`);
      }
    });

    it('without any key too (the URL is refused before anything else reads it)', async () => {
      for (const [method, path] of urls) {
        const res = await t.request(method, path, { key: null });
        expectError(res, 400, 'validation_failed', `${method} ${path}`);
      }
    });

    it('a percent-encoded %00 is a literal text, not a NUL', async () => {
      const res = await t.request('GET', '/v1/tenants/acme%2500');
      expectError(res, 404, 'tenant_not_found', 'acme%2500');
    });
  });
});
