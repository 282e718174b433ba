import { badRequest, isPlainObject, readJson, SandboxHttpError, sendJson } from './http-io.js';
import { parseFault } from './fault-controller.js';
import { parseQuotas } from './quota-meter.js';
import { parseListing } from './workflow-listing.js';
import { SANDBOX_COMPANY } from './seed.js';
import type { SandboxControls } from './sandbox-controls.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import type { WorkflowStep } from './workflow-store.js';

const WORKFLOW_CONTROL = /^\/_sandbox\/workflows\/([^/]+)\/(step|attributes|visibility)$/;

/**
 * /_sandbox/*: drives a sandbox running in another process. No authentication, so it answers loopback
 * callers only; never recorded, never faulted.
 */
export async function handleControl(call: SandboxCall, rt: SandboxRuntime, controls: SandboxControls): Promise<void> {
  const { req, res, path } = call;
  if (!isLoopback(req.socket.remoteAddress))
    throw new SandboxHttpError(403, 'forbidden', 'The sandbox control endpoints answer local callers only');
  const route = `${req.method ?? ''} ${path}`;
  switch (route) {
    case 'GET /_sandbox/records':
      return sendJson(res, 200, rt.recorder.records());
    case 'DELETE /_sandbox/records':
      rt.recorder.clear();
      res.writeHead(204).end();
      return;
    case 'GET /_sandbox/stats':
      return sendJson(res, 200, rt.recorder.snapshot());
    case 'GET /_sandbox/refresh-log':
      return sendJson(res, 200, rt.tokens.refreshLog());
    case 'GET /_sandbox/refresh-calls': {
      const family = new URLSearchParams(call.rawQuery).get('family');
      if (!family) throw badRequest('invalid_query', 'family is required: GET /_sandbox/refresh-calls?family=fam_...');
      return sendJson(res, 200, rt.tokens.refreshCallsOf(family));
    }
    case 'GET /_sandbox/deliveries':
      return sendJson(res, 200, rt.dispatcher.deliveries());
    case 'GET /_sandbox/users':
      return sendJson(res, 200, rt.users.seeds());
    case 'GET /_sandbox/fault':
      return sendJson(res, 200, { fault: rt.faults.current() });
    case 'POST /_sandbox/tokens': {
      const body = await objectBody(call);
      only(body, ['userId', 'scopes']);
      if (body.scopes !== undefined && !Array.isArray(body.scopes)) throw badRequest('invalid_scope', 'scopes must be an array');
      return sendJson(res, 200, controls.issueTokens(stringField(body, 'userId'), body.scopes as string[] | undefined));
    }
    case 'POST /_sandbox/expire': {
      const body = (await readJson(req)) ?? {};
      if (!isPlainObject(body)) throw badRequest('invalid_body', 'The body must be a JSON object');
      only(body, ['userId', 'accessToken']);
      const filter: { userId?: string; accessToken?: string } = {};
      if (body.userId !== undefined) filter.userId = stringField(body, 'userId');
      if (body.accessToken !== undefined) filter.accessToken = stringField(body, 'accessToken');
      return sendJson(res, 200, { expired: controls.expireAccessTokens(filter) });
    }
    case 'POST /_sandbox/revoke': {
      const body = await objectBody(call);
      only(body, ['userId']);
      return sendJson(res, 200, { revoked: controls.revokeUser(stringField(body, 'userId')) });
    }
    case 'GET /_sandbox/quotas':
      return sendJson(res, 200, { companyId: SANDBOX_COMPANY.id, quotas: rt.quotas.of(SANDBOX_COMPANY.id) });
    case 'POST /_sandbox/quotas': {
      const body = await objectBody(call);
      only(body, ['companyId', 'quotas']);
      const companyId = body.companyId === undefined ? SANDBOX_COMPANY.id : stringField(body, 'companyId');
      if (!('quotas' in body)) throw badRequest('invalid_quota', 'quotas is required (null: back to the defaults)');
      rt.quotas.set(companyId, body.quotas === null ? null : parseQuotas(body.quotas, 'quotas'));
      return sendJson(res, 200, { companyId, quotas: rt.quotas.of(companyId) });
    }
    case 'GET /_sandbox/listing':
      return sendJson(res, 200, rt.listing.current());
    case 'POST /_sandbox/listing': {
      const body = await objectBody(call);
      return sendJson(res, 200, controls.setListing(parseListing(body, 'body')));
    }
    case 'GET /_sandbox/webhooks/drop':
      return sendJson(res, 200, { rate: rt.dispatcher.dropRate });
    case 'POST /_sandbox/webhooks/drop': {
      const body = await objectBody(call);
      only(body, ['rate']);
      if (!('rate' in body)) throw badRequest('invalid_body', 'rate is required (0 to 1)');
      return sendJson(res, 200, controls.setWebhookDropRate(body.rate as number));
    }
    case 'POST /_sandbox/workflows/bulk': {
      const body = await objectBody(call);
      only(body, ['userId', 'count']);
      return sendJson(res, 200, controls.bulkCreateWorkflows(stringField(body, 'userId'), body.count as number));
    }
    case 'POST /_sandbox/fault': {
      const fault = parseFault(await readJson(req));
      controls.setFault(fault);
      return sendJson(res, 200, { fault: rt.faults.current() });
    }
  }
  const match = req.method === 'POST' ? WORKFLOW_CONTROL.exec(path) : null;
  if (match) {
    const id = decodeURIComponent(match[1]);
    const body = await objectBody(call);
    if (match[2] === 'visibility') {
      only(body, ['userId', 'visible']);
      if (typeof body.visible !== 'boolean') throw badRequest('invalid_body', 'visible must be true or false');
      return sendJson(res, 200, controls.setWorkflowVisibility(id, stringField(body, 'userId'), body.visible));
    }
    if (match[2] === 'step') {
      only(body, ['step']);
      const workflow = controls.setWorkflowStep(id, stringField(body, 'step') as WorkflowStep);
      return sendJson(res, 200, workflow);
    }
    only(body, ['name', 'value']);
    if (!('value' in body)) throw badRequest('invalid_attribute', 'value is required (null is a value)');
    return sendJson(res, 200, controls.setWorkflowAttribute(id, stringField(body, 'name'), body.value));
  }
  throw new SandboxHttpError(404, 'not_found', `No control route ${route}`);
}

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

async function objectBody(call: SandboxCall): Promise<Record<string, unknown>> {
  const body = await readJson(call.req);
  if (!isPlainObject(body)) throw badRequest('invalid_body', 'The body must be a JSON object');
  return body;
}

function only(body: Record<string, unknown>, keys: string[]): void {
  for (const key of Object.keys(body)) if (!keys.includes(key)) throw badRequest('unknown_field', `${key} is not a known field`);
}

function stringField(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  if (typeof value !== 'string' || value === '') throw badRequest('invalid_body', `${name} must be a non-empty string`);
  return value;
}
