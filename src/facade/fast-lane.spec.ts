import 'reflect-metadata';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { RequestMethod } from '@nestjs/common';
import { FacadeController } from './facade.controller.js';
import { fastLaneRoute } from './fast-lane.js';

function route(method: string, url: string, headers: Record<string, string> = {}) {
  return fastLaneRoute({ method, url, headers } as unknown as IncomingMessage);
}

describe('the fast lane takes exactly the facade routes, in their plain form', () => {
  it("takes FacadeController's routes", () => {
    const same = { kind: 'same', route: 'user' };
    expect(route('GET', '/v1/tenants/acme/workflows')).toEqual({ tenantId: 'acme', target: same });
    expect(route('GET', "/v1/tenants/acme/workflows?step=Create&x=%20a%2Fb&y=it's")).toEqual({ tenantId: 'acme', target: same });
    expect(route('POST', '/v1/tenants/acme/workflows')).toEqual({ tenantId: 'acme', target: same });
    expect(route('POST', '/v1/tenants/acme/workflows/async')).toEqual({ tenantId: 'acme', target: same });
    expect(route('GET', '/v1/tenants/acme/workflows/wf_1')).toEqual({ tenantId: 'acme', target: same });
    expect(route('GET', '/v1/tenants/acme/workflows/async')).toEqual({ tenantId: 'acme', target: same });
    expect(route('PATCH', '/v1/tenants/acme/workflows/wf_1/approvals')).toEqual({ tenantId: 'acme', target: same });
    expect(route('POST', '/v1/tenants/acme/workflows/wf_1/upload-signed')).toEqual({ tenantId: 'acme', target: same });
    expect(route('GET', '/v1/tenants/acme/me?x=1')).toEqual({ tenantId: 'acme', target: { kind: 'userinfo' } });
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']) {
      expect(route(method, '/v1/tenants/acme/proxy/webhooks/h1?x=1')).toEqual({ tenantId: 'acme', target: { kind: 'proxy' } });
    }
    expect(route('GET', '/v1/tenants/acme/proxy/workflows/../oauth/token')).toEqual({ tenantId: 'acme', target: { kind: 'proxy' } });
  });

  it("takes every route FacadeController declares (the two lists cannot drift apart)", () => {
    const base = Reflect.getMetadata(PATH_METADATA, FacadeController) as string;
    const handlers = Object.getOwnPropertyNames(FacadeController.prototype).filter((name) => name !== 'constructor');
    expect(handlers.length).toBeGreaterThanOrEqual(8);
    for (const name of handlers) {
      const handler = (FacadeController.prototype as unknown as Record<string, object>)[name];
      const path = Reflect.getMetadata(PATH_METADATA, handler) as string;
      const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod];
      const url = `/${base}/${path}`.replace(':tenantId', 'acme').replace(':workflowId', 'wf_1').replace('*path', 'webhooks/h1');
      for (const m of method === 'ALL' ? ['GET', 'POST', 'DELETE'] : [method]) {
        expect([name, m, url, route(m, url)?.tenantId]).toEqual([name, m, url, 'acme']);
      }
    }
  });

  it('leaves other methods to Express (HEAD and OPTIONS included)', () => {
    expect(route('HEAD', '/v1/tenants/acme/workflows')).toBeNull();
    expect(route('OPTIONS', '/v1/tenants/acme/workflows')).toBeNull();
    expect(route('DELETE', '/v1/tenants/acme/workflows')).toBeNull();
    expect(route('POST', '/v1/tenants/acme/workflows/wf_1')).toBeNull();
    expect(route('GET', '/v1/tenants/acme/workflows/wf_1/approvals')).toBeNull();
    expect(route('GET', '/v1/tenants/acme/workflows/wf_1/upload-signed')).toBeNull();
    expect(route('POST', '/v1/tenants/acme/me')).toBeNull();
  });

  it('leaves other paths, and paths in a form Express would normalise, to Express', () => {
    for (const url of [
      '/v1/tenants',
      '/v1/tenants/acme',
      '/v1/tenants/acme/',
      '/v1/tenants/acme/connections',
      '/v1/tenants/acme/webhooks',
      '/v1/tenants//workflows',
      '/v1/tenants/ac%6De/workflows',
      '/v1/tenants/acme/workflows/',
      '/v1/tenants/acme/Workflows',
      '/V1/tenants/acme/workflows',
      '/v1/tenants/acme/workflows#x',
      '/v1/tenants/acme/workflows//approvals',
      '/v1/tenants/acme/workflows/wf_1/approvals/x',
      '/v1/tenants/acme/workflowsx',
      '/v1/tenants/acme/proxy',
      '/v1/tenants/acme/proxy/',
      '/v1/tenants/acme/proxy/workflows/',
      '/v1/tenants/acme/proxy/a%2Fb',
      'http://host/v1/tenants/acme/workflows',
    ]) {
      expect([url, route('GET', url)]).toEqual([url, null]);
    }
  });

  it('leaves a GET /me with a body to Express, which parses it there', () => {
    expect(route('GET', '/v1/tenants/acme/me', { 'content-length': '2' })).toBeNull();
    expect(route('GET', '/v1/tenants/acme/me', { 'transfer-encoding': 'chunked' })).toBeNull();
  });
});
