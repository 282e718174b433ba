import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApp, type TestApp } from './support/test-app.js';

interface Tenant {
  id: string;
  name: string;
  environment: string;
  design: string;
  allowedReturnUrls: string[];
  eventsTargetUrl: string | null;
  eventsSecret?: string;
}
interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

const newTenant = (over: Record<string, unknown> = {}) => ({
  name: 'Acme Legal',
  environment: 'sandbox',
  allowedReturnUrls: ['http://localhost:5173/'],
  ...over,
});

describe('tenants and keys (API.md sections 2 to 4)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates, lists, reads, updates and deletes a tenant; the events secret is shown only at creation', async () => {
    const created = await t.request<Tenant>('POST', '/v1/tenants', {
      body: newTenant({ id: 'crud-co', eventsTargetUrl: 'http://localhost:9999/events' }),
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: 'crud-co',
      name: 'Acme Legal',
      environment: 'sandbox',
      design: 'admin+users',
      eventsTargetUrl: 'http://localhost:9999/events',
    });
    expect(created.body.eventsSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const got = await t.request<Tenant>('GET', '/v1/tenants/crud-co');
    expect(got.status).toBe(200);
    expect(got.body.eventsSecret).toBeUndefined();
    expect(got.text).not.toContain(created.body.eventsSecret);

    const listed = await t.request<Tenant[]>('GET', '/v1/tenants');
    expect(listed.body.map((x) => x.id)).toContain('crud-co');
    expect(listed.text).not.toContain('whsec_');

    const patched = await t.request<Tenant>('PATCH', '/v1/tenants/crud-co', {
      body: { name: 'Acme 2', design: 'users', eventsTargetUrl: null },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Acme 2', design: 'users', eventsTargetUrl: null });

    const rotated = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/crud-co/events-secret');
    expect(rotated.status).toBe(201);
    expect(rotated.body.eventsSecret).toMatch(/^whsec_/);
    expect(rotated.body.eventsSecret).not.toBe(created.body.eventsSecret);

    const stored = await t.db.query<{ events_secret_enc: string }>('SELECT events_secret_enc FROM tenants WHERE id = $1', ['crud-co']);
    // Sealed with the tenant's own data key (the envelope format: docs/keys.md).
    expect(stored.rows[0].events_secret_enc).toMatch(/^v2\.1\./);
    expect(stored.rows[0].events_secret_enc).not.toContain(rotated.body.eventsSecret.slice(6, 20));

    expect((await t.request('DELETE', '/v1/tenants/crud-co')).status).toBe(204);
    const gone = await t.request<ErrorBody>('GET', '/v1/tenants/crud-co');
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('tenant_not_found');
  });

  it('generates a slug id from the name and refuses a taken explicit id with 409', async () => {
    const a = await t.request<Tenant>('POST', '/v1/tenants', { body: newTenant({ name: 'Zürich Contracts AG' }) });
    expect(a.status).toBe(201);
    expect(a.body.id).toBe('zurich-contracts-ag');
    const b = await t.request<Tenant>('POST', '/v1/tenants', { body: newTenant({ name: 'Zürich Contracts AG' }) });
    expect(b.status).toBe(201);
    expect(b.body.id).toMatch(/^zurich-contracts-ag-[0-9a-f]{6}$/);
    const c = await t.request<ErrorBody>('POST', '/v1/tenants', { body: newTenant({ id: 'zurich-contracts-ag' }) });
    expect(c.status).toBe(409);
    expect(c.body.error.code).toBe('tenant_exists');
  });

  it('answers bad bodies with 400 validation_failed and writes nothing', async () => {
    const before = await t.db.query('SELECT count(*)::int AS n FROM tenants');
    const bad = [
      {},
      newTenant({ environment: 'mars' }),
      newTenant({ allowedReturnUrls: [] }),
      newTenant({ allowedReturnUrls: ['not a url'] }),
      newTenant({ id: 'Not A Slug' }),
      newTenant({ eventsTargetUrl: 'ftp://x.example' }),
      newTenant({ unexpected: true }),
      newTenant({ name: '' }),
    ];
    for (const body of bad) {
      const res = await t.request<ErrorBody>('POST', '/v1/tenants', { body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(typeof res.body.error.message).toBe('string');
      expect(res.body.error.requestId).toBe(res.headers.get('x-request-id'));
    }
    const malformed = await t.request<ErrorBody>('POST', '/v1/tenants', { body: '{"name": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('validation_failed');
    const after = await t.db.query('SELECT count(*)::int AS n FROM tenants');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('refuses an environment that is not configured with 422', async () => {
    const res = await t.request<ErrorBody>('POST', '/v1/tenants', { body: newTenant({ environment: 'eu' }) });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('environment_not_configured');
  });

  it('shows a tenant key once and stores only its SHA-256', async () => {
    await t.request('POST', '/v1/tenants', { body: newTenant({ id: 'keyed' }) });
    const created = await t.request<{ id: string; key: string; prefix: string }>('POST', '/v1/tenants/keyed/api-keys', {
      body: { name: 'backend' },
    });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^cwsk_[A-Za-z0-9_-]{43}$/);
    expect(created.body.key.startsWith(created.body.prefix)).toBe(true);

    const listed = await t.request<Array<{ id: string }>>('GET', '/v1/tenants/keyed/api-keys');
    expect(listed.body.map((k) => k.id)).toEqual([created.body.id]);
    expect(listed.text).not.toContain(created.body.key);

    const dump = await t.db.query('SELECT * FROM tenant_api_keys');
    const text = JSON.stringify(dump.rows);
    expect(text).not.toContain(created.body.key);
    expect(text).not.toContain(created.body.key.slice(14));
    const { createHash } = await import('node:crypto');
    const row = dump.rows.find((r: { id: string }) => r.id === created.body.id) as { key_hash: Buffer };
    expect(row.key_hash.equals(createHash('sha256').update(created.body.key).digest())).toBe(true);

    const own = await t.request<Tenant>('GET', '/v1/tenants/keyed', { key: created.body.key });
    expect(own.status).toBe(200);

    expect((await t.request('DELETE', `/v1/tenants/keyed/api-keys/${created.body.id}`)).status).toBe(204);
    const revoked = await t.request<ErrorBody>('GET', '/v1/tenants/keyed', { key: created.body.key });
    expect(revoked.status).toBe(401);
    expect(revoked.body.error.code).toBe('unauthorized');
    expect((await t.request<ErrorBody>('DELETE', `/v1/tenants/keyed/api-keys/${created.body.id}`)).status).toBe(404);
    expect((await t.request<ErrorBody>('DELETE', '/v1/tenants/keyed/api-keys/not-a-uuid')).status).toBe(404);
  });

  it("answers 404 tenant_not_found to tenant A's key on every tenant-B route, and 403 on operator routes of its own", async () => {
    await t.request('POST', '/v1/tenants', { body: newTenant({ id: 'tenant-a' }) });
    await t.request('POST', '/v1/tenants', { body: newTenant({ id: 'tenant-b' }) });
    const keyA = (await t.request<{ key: string }>('POST', '/v1/tenants/tenant-a/api-keys', { body: {} })).body.key;
    const keyB = await t.request<{ id: string }>('POST', '/v1/tenants/tenant-b/api-keys', { body: {} });

    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/v1/tenants/tenant-b'],
      ['PATCH', '/v1/tenants/tenant-b', { name: 'pwned' }],
      ['DELETE', '/v1/tenants/tenant-b'],
      ['POST', '/v1/tenants/tenant-b/events-secret'],
      ['POST', '/v1/tenants/tenant-b/api-keys', {}],
      ['GET', '/v1/tenants/tenant-b/api-keys'],
      ['DELETE', `/v1/tenants/tenant-b/api-keys/${keyB.body.id}`],
      ['GET', '/v1/tenants/does-not-exist'],
    ];
    for (const [method, path, body] of routes) {
      const res = await t.request<ErrorBody>(method, path, { key: keyA, body });
      expect([method, path, res.status, res.body.error?.code]).toEqual([method, path, 404, 'tenant_not_found']);
    }
    const b = await t.request<Tenant>('GET', '/v1/tenants/tenant-b');
    expect(b.body.name).toBe('Acme Legal');
    expect((await t.request<Array<{ id: string }>>('GET', '/v1/tenants/tenant-b/api-keys')).body).toHaveLength(1);

    for (const [method, path] of [
      ['GET', '/v1/tenants'],
      ['POST', '/v1/tenants'],
      ['PATCH', '/v1/tenants/tenant-a'],
      ['POST', '/v1/tenants/tenant-a/api-keys'],
    ]) {
      const res = await t.request<ErrorBody>(method, path, { key: keyA, body: method === 'GET' ? undefined : {} });
      expect([path, res.status, res.body.error.code]).toEqual([path, 403, 'forbidden']);
    }
  });

  it('answers 401 without a key or with a wrong one, in the error shape with x-request-id', async () => {
    for (const key of [null, 'nope', 'cwsk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', `${t.operatorKey}x`]) {
      const res = await t.request<ErrorBody>('GET', '/v1/tenants', { key });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(res.headers.get('x-request-id')).toBeTruthy();
    }
  });

  it('keeps a caller x-request-id and sets one on every answer', async () => {
    const res = await t.request('GET', '/health/live', { key: null, headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    const unknown = await t.request<ErrorBody>('GET', '/no/such/route', { key: null });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.requestId).toBe(unknown.headers.get('x-request-id'));
  });

  it('is ready, and serves the OpenAPI document', async () => {
    const ready = await t.request<{ status: string; info: Record<string, { status: string }> }>('GET', '/health/ready', { key: null });
    expect(ready.status).toBe(200);
    expect(ready.body.info.database.status).toBe('up');
    expect(ready.body.info.migrations.status).toBe('up');
    const doc = await t.request<{ openapi: string; paths: Record<string, unknown> }>('GET', '/docs-json', { key: null });
    expect(doc.status).toBe(200);
    expect(doc.body.paths['/v1/tenants']).toBeDefined();
    const ui = await t.request('GET', '/docs', { key: null });
    expect(ui.status).toBe(200);
    const metrics = await t.request('GET', '/metrics', { key: null });
    expect(metrics.text).toContain('process_cpu_seconds_total');
  });

  it('leaves no trace in the logs of a bearer secret or of a secret-named field', async () => {
    const secret = 'sup3r-s3cret-bearer-value-that-must-not-leak';
    await t.request('GET', '/v1/tenants', { key: secret });
    await t.request('POST', '/v1/tenants', { key: secret, body: { client_secret: secret, refresh_token: secret } });
    await t.request('GET', `/v1/tenants?access_token=${secret}`, { headers: { cookie: `s=${secret}` } });
    await new Promise((r) => setTimeout(r, 50));
    const all = t.logs.join('');
    expect(all.length).toBeGreaterThan(0);
    expect(all).toContain('/v1/tenants');
    expect(all).not.toContain(secret);
    expect(all).not.toContain(t.operatorKey);
    const completed = t.logs
      .map((l) => JSON.parse(l) as { msg?: string; res?: { statusCode?: number } })
      .filter((l) => l.msg === 'request completed');
    expect(completed.some((l) => l.res?.statusCode === 401)).toBe(true);
  });
});
