import type { UpstreamSchemaName } from '../upstream/upstream-openapi.js';

/**
 * The facade's routes under /v1/tenants/{tenantId} (API.md section 7), written once. This table drives the
 * front door's matching (edge/front-door.ts), the OpenAPI document (facade-openapi.ts), which paths no body parser
 * may read (service.ts, `buildApp`), and what is logged (facade-door.ts). POST/GET /webhooks are not here: they
 * belong to the webhooks module (provisioning, API.md section 8).
 */

/** The methods a route answers; `ANY`: every method (documented as the standard ones). */
export type RouteMethod = 'GET' | 'POST' | 'PATCH' | 'ANY';

/**
 * Whose token the upstream call carries. `user`: the user named by X-User-Id (or, in design `admin` without
 * it, the admin connection). `by-path`: the canonical proxied path decides: admin under /webhooks, else user.
 */
export type TokenKind = 'user' | 'by-path';

export interface FacadeRoute {
  /** Unique; the OpenAPI operationId and the `route` field of log lines. */
  id: string;
  method: RouteMethod;
  /** After /v1/tenants/{tenantId}: literal segments, `{name}` parameters, and a last `{path}` that takes the rest. */
  path: string;
  token: TokenKind;
  /**
   * The upstream call: `same` (the same path and raw query under the API base), `userinfo` (the environment's
   * /userinfo with its configured method, the query kept), `proxy` (the rest of the path, canonicalised).
   */
  upstream: 'same' | 'userinfo' | 'proxy';
  /** The request body is streamed to the upstream as is; media types for the document. Empty: no body. */
  streamed: string[];
  summary: string;
  /**
   * The upstream's successful answer, for the document: its status (`2XX`: whatever success the upstream gives)
   * and the schema of its body (upstream/upstream-openapi.ts).
   */
  answer: { status: number | '2XX'; description: string; schema: UpstreamSchemaName | 'any' };
  /**
   * Access log lines: `errors` writes one line for every answer of status 400 or more (an access line per
   * success costs a measurable share of a proxied call: docs/facade.md, Performance); 5xx failures are
   * also logged with their cause.
   */
  log: 'errors';
}

const JSON_OR_MULTIPART = ['application/json', 'multipart/form-data'];

export const FACADE_ROUTES: readonly FacadeRoute[] = [
  {
    id: 'facadeListWorkflows',
    method: 'GET',
    path: '/workflows',
    token: 'user',
    upstream: 'same',
    streamed: [],
    summary: 'List the workflows the user may see',
    answer: {
      status: 200,
      description: 'The workflows (query string passed through untouched); each carries versionNumber, lastModified and Author.',
      schema: 'UpstreamWorkflowList',
    },
    log: 'errors',
  },
  {
    id: 'facadeLaunchWorkflow',
    method: 'POST',
    path: '/workflows',
    token: 'user',
    upstream: 'same',
    streamed: JSON_OR_MULTIPART,
    summary: 'Launch a workflow (the user is its creator)',
    answer: { status: 201, description: 'The new workflow.', schema: 'UpstreamWorkflow' },
    log: 'errors',
  },
  {
    id: 'facadeLaunchWorkflowAsync',
    method: 'POST',
    path: '/workflows/async',
    token: 'user',
    upstream: 'same',
    streamed: JSON_OR_MULTIPART,
    summary: 'Launch a workflow asynchronously',
    answer: { status: 202, description: 'Accepted.', schema: 'UpstreamObject' },
    log: 'errors',
  },
  {
    id: 'facadeGetWorkflow',
    method: 'GET',
    path: '/workflows/{workflowId}',
    token: 'user',
    upstream: 'same',
    streamed: [],
    summary: 'Read one workflow',
    answer: { status: 200, description: 'The workflow with versionNumber, lastModified and Author.', schema: 'UpstreamWorkflow' },
    log: 'errors',
  },
  {
    id: 'facadeApproveWorkflow',
    method: 'PATCH',
    path: '/workflows/{workflowId}/approvals',
    token: 'user',
    upstream: 'same',
    streamed: ['application/json'],
    summary: 'Approve on behalf of the user (only the holder of the approval can)',
    answer: { status: 200, description: 'The workflow after the approval.', schema: 'UpstreamWorkflow' },
    log: 'errors',
  },
  {
    id: 'facadeUploadSigned',
    method: 'POST',
    path: '/workflows/{workflowId}/upload-signed',
    token: 'user',
    upstream: 'same',
    streamed: ['multipart/form-data'],
    summary: 'Upload a signed document (the workflow must be in the Sign step)',
    answer: { status: 200, description: 'The workflow with the signed document.', schema: 'UpstreamWorkflow' },
    log: 'errors',
  },
  {
    id: 'facadeMe',
    method: 'GET',
    path: '/me',
    token: 'user',
    upstream: 'userinfo',
    streamed: [],
    summary: "The acting user's upstream profile",
    answer: { status: 200, description: "The token's user: id, e-mail, username, granted scopes.", schema: 'UpstreamUserInfo' },
    log: 'errors',
  },
  {
    id: 'facadeProxy',
    method: 'ANY',
    path: '/proxy/{path}',
    token: 'by-path',
    upstream: 'proxy',
    streamed: ['application/json', 'multipart/form-data', 'application/octet-stream'],
    summary: 'Any upstream endpoint, as is',
    answer: { status: '2XX', description: 'Whatever the upstream answers.', schema: 'any' },
    log: 'errors',
  },
];

export const TENANT_PREFIX = '/v1/tenants/';

/** A route's path, split: literal segments, `{name}` parameters, and the `{path}` rest. */
export interface CompiledRoute {
  route: FacadeRoute;
  segments: Array<{ literal: string } | { param: string } | { rest: string }>;
}

export const COMPILED_ROUTES: readonly CompiledRoute[] = FACADE_ROUTES.map((route) => ({
  route,
  segments: route.path
    .slice(1)
    .split('/')
    .map((s, i, all) => {
      const name = /^\{(\w+)\}$/.exec(s)?.[1];
      if (name === undefined) return { literal: s.toLowerCase() };
      return name === 'path' && i === all.length - 1 ? { rest: name } : { param: name };
    }),
}));

export interface RouteMatch {
  route: FacadeRoute;
  /** Raw (as sent) tenant id. */
  tenantId: string;
  /** Raw (as sent) parameters, by name. */
  params: Record<string, string>;
  /** The raw rest of the path after the route's literal prefix, for a `{path}` route. */
  rest: string;
  /** The path after /v1/tenants/{tenantId}, as sent, without the query. */
  path: string;
  /** The raw query with its `?`, or ''. */
  query: string;
}

/**
 * The facade route a request's method and path select, or null. `pathMatched` is set when the path is a
 * facade route's path but no route takes the method: Express answers those (404), without parsing a body.
 * Literal segments compare regardless of letter case, and one trailing slash is allowed, as Express matches.
 */
export function matchRoute(method: string, url: string): { match: RouteMatch | null; pathMatched: boolean } {
  const q = url.indexOf('?');
  const fullPath = q < 0 ? url : url.slice(0, q);
  if (fullPath.length <= TENANT_PREFIX.length || !startsWithPrefix(fullPath)) return NO_MATCH;
  const slash = fullPath.indexOf('/', TENANT_PREFIX.length);
  if (slash <= TENANT_PREFIX.length) return NO_MATCH;
  const tenantId = fullPath.slice(TENANT_PREFIX.length, slash);
  const path = fullPath.slice(slash);
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  const parts = trimmed.slice(1).split('/');
  let pathMatched = false;
  for (const compiled of COMPILED_ROUTES) {
    const found = matchSegments(compiled, parts, path);
    if (found === null) continue;
    const { route } = compiled;
    if (route.method === 'ANY' || route.method === method || (method === 'HEAD' && route.method === 'GET')) {
      return {
        match: { route, tenantId, params: found.params, rest: found.rest, path, query: q < 0 ? '' : url.slice(q) },
        pathMatched: true,
      };
    }
    pathMatched = true;
  }
  return { match: null, pathMatched };
}

const NO_MATCH = { match: null, pathMatched: false };

function startsWithPrefix(path: string): boolean {
  return path.startsWith(TENANT_PREFIX) || path.slice(0, TENANT_PREFIX.length).toLowerCase() === TENANT_PREFIX;
}

function matchSegments(compiled: CompiledRoute, parts: string[], path: string): { params: Record<string, string>; rest: string } | null {
  const params: Record<string, string> = {};
  const { segments } = compiled;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    if ('rest' in segment) {
      // The rest keeps its own trailing slash (the upstream may tell the two apart); it may not be empty.
      let offset = 0;
      for (let k = 0; k < i; k++) offset += parts[k].length + 1;
      const rest = path.slice(1 + offset);
      return i < parts.length && rest !== '' ? { params, rest } : null;
    }
    if (i >= parts.length) return null;
    const part = parts[i];
    if ('literal' in segment) {
      if (part !== segment.literal && part.toLowerCase() !== segment.literal) return null;
    } else {
      if (part === '') return null;
      params[segment.param] = part;
    }
  }
  return parts.length === segments.length ? { params, rest: '' } : null;
}

/** Whether a request target's path is a facade route's path (any method): no body parser may read its body. */
export function isFacadePath(url: string): boolean {
  const { match, pathMatched } = matchRoute('ANY', url);
  return match !== null || pathMatched;
}
