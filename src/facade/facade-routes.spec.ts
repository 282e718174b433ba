import { describe, expect, it } from '@jest/globals';
import { facadePaths } from './facade-openapi.js';
import { FACADE_ROUTES, isFacadePath, matchRoute } from './facade-routes.js';

const id = (method: string, url: string) => matchRoute(method, url).match?.route.id ?? null;

describe('the facade route table', () => {
  it('has unique ids and one entry per method and path', () => {
    expect(new Set(FACADE_ROUTES.map((r) => r.id)).size).toBe(FACADE_ROUTES.length);
    expect(new Set(FACADE_ROUTES.map((r) => `${r.method} ${r.path}`)).size).toBe(FACADE_ROUTES.length);
  });

  it('selects every route from its own method and path', () => {
    for (const route of FACADE_ROUTES) {
      const url = `/v1/tenants/acme${route.path.replace('{workflowId}', 'wf_1').replace('{path}', 'webhooks/h1')}?x=1`;
      for (const method of route.method === 'ANY' ? ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'SEARCH'] : [route.method]) {
        expect([method, url, id(method, url)]).toEqual([method, url, route.id]);
      }
    }
  });

  it('gives the raw tenant, parameters, rest and query', () => {
    expect(matchRoute('PATCH', '/v1/tenants/ac%6De/workflows/wf%201/approvals?a=b').match).toMatchObject({
      tenantId: 'ac%6De',
      params: { workflowId: 'wf%201' },
      path: '/workflows/wf%201/approvals',
      query: '?a=b',
    });
    expect(matchRoute('DELETE', '/v1/tenants/acme/proxy/webhooks/h1/?x').match).toMatchObject({
      rest: 'webhooks/h1/',
      path: '/proxy/webhooks/h1/',
      query: '?x',
    });
  });

  it('matches as Express did: letter case of literals, one trailing slash, HEAD with GET', () => {
    expect(id('GET', '/v1/tenants/acme/Workflows')).toBe('facadeListWorkflows');
    expect(id('GET', '/V1/Tenants/acme/workflows')).toBe('facadeListWorkflows');
    expect(id('GET', '/v1/tenants/acme/workflows/')).toBe('facadeListWorkflows');
    expect(id('HEAD', '/v1/tenants/acme/workflows/wf_1')).toBe('facadeGetWorkflow');
    expect(id('GET', '/v1/tenants/acme/workflows/async')).toBe('facadeGetWorkflow');
  });

  it('leaves other methods and paths to Express; facade paths keep their body unparsed', () => {
    for (const [method, url] of [
      ['DELETE', '/v1/tenants/acme/workflows'],
      ['POST', '/v1/tenants/acme/workflows/wf_1'],
      ['GET', '/v1/tenants/acme/workflows/wf_1/approvals'],
      ['POST', '/v1/tenants/acme/me'],
    ]) {
      expect([method, url, id(method, url)]).toEqual([method, url, null]);
      expect(isFacadePath(url)).toBe(true);
    }
    for (const url of [
      '/v1/tenants',
      '/v1/tenants/acme',
      '/v1/tenants/acme/',
      '/v1/tenants/acme/connections',
      '/v1/tenants/acme/webhooks',
      '/v1/tenants//workflows',
      '/v1/tenants/acme/workflows//approvals',
      '/v1/tenants/acme/workflows/wf_1/approvals/x',
      '/v1/tenants/acme/workflowsx',
      '/v1/tenants/acme/proxy',
      '/v1/tenants/acme/proxy/',
      '/health/live',
    ]) {
      expect([url, id('GET', url), isFacadePath(url)]).toEqual([url, null, false]);
    }
  });

  it('documents every route with the standard methods only', () => {
    const paths = facadePaths();
    const ops = Object.values(paths).flatMap((item) => Object.entries(item));
    for (const route of FACADE_ROUTES) {
      expect(ops.filter(([, op]) => String(op.operationId).startsWith(route.id)).length).toBeGreaterThan(0);
    }
    for (const [method, op] of ops) {
      expect(['get', 'post', 'put', 'patch', 'delete', 'head', 'options']).toContain(method);
      expect(op).toMatchObject({ summary: expect.any(String), security: [{ bearer: [] }] });
      expect(Object.keys(op.responses as object)).toEqual(expect.arrayContaining(['400', '401', '404', '409', '429']));
    }
  });
});
