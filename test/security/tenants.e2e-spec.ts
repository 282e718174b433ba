import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { expectError, newTenantKey, type ErrorBody } from './support.js';
import { RetentionService } from '../../src/retention/retention.service.js';

/**
 * A tenant that does not exist is `404 tenant_not_found` on every tenant-scoped route, for the operator
 * as for a tenant key, before anything else is looked at. The routes are read from the OpenAPI document,
 * so a route added later is covered without touching this file.
 */

/** Ids that name no tenant: never created, deleted, or not even a possible id (percent-encoded as sent). */
const UNKNOWN_IDS = [
  'nowhere',
  'ghost-co',
  'doomed',
  'ACME',
  'Acme',
  'acme-',
  '-acme',
  'a'.repeat(64),
  'acme%20',
  '%C3%A9cole',
  'acme%2F',
  'acme.',
  '0',
  'acme%2500',
];

const PARAMETER_VALUES: Record<string, string> = {
  connectionId: '00000000-0000-4000-8000-000000000000',
  keyId: '00000000-0000-4000-8000-000000000000',
  eventId: '00000000-0000-4000-8000-000000000000',
  workflowId: 'wf_1',
  path: 'workflows',
};

interface Route {
  method: string;
  /** With `{tenantId}` still in it. */
  template: string;
}

describe('an unknown tenant is 404 tenant_not_found on every tenant-scoped route', () => {
  let t: TestApp;
  let acmeKey: string;
  let routes: Route[];

  beforeAll(async () => {
    t = await startTestApp();
    // The removal below is driven here; the service's own minute timer stops so that it cannot take the run first.
    await t.app.get(RetentionService).onModuleDestroy();
    await newTenant(t, 'acme');
    await newTenant(t, 'beta');
    await newTenant(t, 'doomed');
    acmeKey = await newTenantKey(t, 'acme');
    expect((await t.request('DELETE', '/v1/tenants/doomed')).status).toBe(204);
    // Its rows, the tenant's own included, go in the background: finish that here.
    expect((await t.app.get(RetentionService).runOnce())?.tenantsRemoved).toEqual(['doomed']);

    const doc = await t.request<{ paths: Record<string, Record<string, unknown>> }>('GET', '/docs-json', { key: null });
    expect(doc.status).toBe(200);
    routes = [];
    for (const [path, item] of Object.entries(doc.body.paths)) {
      // /inbound/{tenantId}/... is not API-key scoped: an unknown tenant there is the same 401 as a wrong secret.
      if (!path.startsWith('/v1/') || !path.includes('{tenantId}')) continue;
      for (const method of Object.keys(item)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const template = path.replace(/\{(\w+)\}/g, (whole: string, name: string) =>
          name === 'tenantId' ? whole : (PARAMETER_VALUES[name] ?? 'x'),
        );
        routes.push({ method: method.toUpperCase(), template });
      }
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (route: Route, tenantId: string, key: string) =>
    t.request<ErrorBody>(route.method, route.template.replace('{tenantId}', tenantId), {
      key,
      body: route.method === 'GET' || route.method === 'DELETE' ? undefined : {},
      headers: { 'x-user-id': 'u-1' },
    });

  it('the OpenAPI document lists the tenant-scoped routes (the table below is not empty)', () => {
    const listed = routes.map((r) => `${r.method} ${r.template}`);
    for (const expected of [
      'GET /v1/tenants/{tenantId}',
      'PATCH /v1/tenants/{tenantId}',
      'DELETE /v1/tenants/{tenantId}',
      'POST /v1/tenants/{tenantId}/api-keys',
      'GET /v1/tenants/{tenantId}/connections',
      'POST /v1/tenants/{tenantId}/connect-sessions',
      'GET /v1/tenants/{tenantId}/events',
      'GET /v1/tenants/{tenantId}/webhooks',
      'GET /v1/tenants/{tenantId}/workflows',
    ]) {
      expect(listed).toContain(expected);
    }
    expect(routes.length).toBeGreaterThanOrEqual(20);
  });

  it('the operator key', async () => {
    for (const route of routes) {
      for (const id of UNKNOWN_IDS)
        expectError(
          await send(route, id, t.operatorKey),
          404,
          'tenant_not_found',
          `${route.method} ${route.template} as operator, tenant ${id}`,
        );
    }
  });

  it("a tenant key: an unknown tenant and another tenant's path answer alike", async () => {
    for (const route of routes) {
      const answers = [];
      for (const id of [...UNKNOWN_IDS, 'beta']) {
        const res = await send(route, id, acmeKey);
        expectError(res, 404, 'tenant_not_found', `${route.method} ${route.template} with acme's key, tenant ${id}`);
        answers.push(res.body.error.message);
      }
      expect(new Set(answers).size).toBe(1);
    }
  });

  it('nothing was created for the unknown tenants', async () => {
    for (const table of ['tenants', 'connect_sessions', 'tenant_api_keys', 'connections', 'events']) {
      const rows = await t.db.query<{ tenant_id: string }>(`SELECT ${table === 'tenants' ? 'id' : 'tenant_id'} AS tenant_id FROM ${table}`);
      expect([table, rows.rows.filter((r) => !['acme', 'beta'].includes(r.tenant_id))]).toEqual([table, []]);
    }
    expect(t.sandbox!.records().filter((r) => !r.path.startsWith('/oauth'))).toEqual([]);
  });

  it('the same routes on an existing tenant are not 404 tenant_not_found (the rule is about existence)', async () => {
    for (const route of routes) {
      for (const key of [t.operatorKey, acmeKey]) {
        if (route.method === 'DELETE' && route.template === '/v1/tenants/{tenantId}') continue;
        const res = await send(route, 'acme', key);
        expect([route.method, route.template, res.body?.error?.code]).not.toEqual([route.method, route.template, 'tenant_not_found']);
      }
    }
  });

  it("a deleted tenant's key is no longer a credential at all", async () => {
    await newTenant(t, 'short-lived');
    const key = await newTenantKey(t, 'short-lived');
    expect((await t.request('GET', '/v1/tenants/short-lived/connections', { key })).status).toBe(200);
    expect((await t.request('DELETE', '/v1/tenants/short-lived')).status).toBe(204);
    expectError(await t.request('GET', '/v1/tenants/short-lived/connections', { key }), 401, 'unauthorized', 'deleted tenant key');
    expectError(await t.request('GET', '/v1/tenants/short-lived/connections'), 404, 'tenant_not_found', 'operator on the deleted tenant');
  });
});
