import type { OpenAPIObject } from '@nestjs/swagger';
import { upstreamAnswer } from '../upstream/upstream-openapi.js';
import { FACADE_ROUTES, TENANT_PREFIX, type FacadeRoute } from './facade-routes.js';

type Operation = Record<string, unknown>;

const ERROR_SCHEMA = { $ref: '#/components/schemas/ErrorResponseDto' };

/** The methods an `ANY` route is documented with (OpenAPI names only these). */
const STANDARD_METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const;

const PASSED_THROUGH =
  'Any other status and body come from the upstream unchanged, with the header `x-upstream-status`; hop-by-hop headers, `set-cookie` and credentials are not passed back.';

/** The facade's own error answers, by status: the same on every facade operation, so written once in the document. */
const FACADE_ERRORS: Record<string, [name: string, codes: string]> = {
  '400': ['FacadeBadRequest', '`user_id_required`, `invalid_path`, `validation_failed` (e.g. NUL in a path parameter)'],
  '401': ['FacadeUnauthorized', '`unauthorized` (no or bad API key)'],
  '404': ['FacadeTenantNotFound', '`tenant_not_found`'],
  '409': ['FacadeNotConnected', '`user_not_connected`, `admin_not_connected`, `reauth_required`'],
  '422': ['FacadeEnvironmentNotConfigured', '`environment_not_configured`'],
  '429': [
    'FacadeTooManyRequests',
    "`too_many_requests` (this tenant holds its limit of calls or uploads in flight: FACADE_TENANT_MAX_IN_FLIGHT, FACADE_TENANT_MAX_UPLOADS; see Retry-After), `quota_exhausted` (the company's upstream budget for this class of calls has no room for it now, or the upstream asked the company to slow down: docs/quotas.md; nothing was sent upstream; Retry-After says when to try again, `details.retryAfterSeconds` too). An upstream 429 itself is passed through with `x-upstream-status: 429`, never retried",
  ],
  '502': ['FacadeUpstreamUnavailable', '`upstream_unavailable` (the upstream could not be reached)'],
  '503': ['FacadeServiceUnavailable', '`service_unavailable` (the database cannot be reached; see Retry-After)'],
  '504': ['FacadeUpstreamTimeout', '`upstream_timeout` (the upstream did not answer in time: UPSTREAM_TIMEOUT_MS)'],
};

const FACADE_RESPONSES = Object.fromEntries(
  Object.values(FACADE_ERRORS).map(([name, codes]) => [
    name,
    { description: `Error codes: ${codes}.`, content: { 'application/json': { schema: ERROR_SCHEMA } } },
  ]),
);

/**
 * The query string goes to the upstream untouched, and the spec shows none of its parameters (docs/upstream.md
 * 4.3): a free-form parameter (`style: form`, `explode: true`), so each of its entries is one `name=value` pair.
 */
const UPSTREAM_QUERY = {
  name: 'upstreamQuery',
  in: 'query',
  required: false,
  style: 'form',
  explode: true,
  description: 'Query parameters passed to the upstream untouched (the spec shows none), each as `name=value`.',
  schema: { type: 'object', additionalProperties: { type: 'string' } },
};

function tokenText(route: FacadeRoute): string {
  if (route.token === 'by-path') {
    return "Calls the upstream path given after /proxy with the admin connection's token when its canonical form is under /webhooks (X-User-Id ignored), else with the token of the user named by X-User-Id. The path is canonicalised once (decoded, `\\` as a separator, dot segments resolved); anything but a plain relative path under the API base is refused with 400 `invalid_path` and nothing is sent upstream.";
  }
  const upstream = route.upstream === 'userinfo' ? '/userinfo (method: CWS_<ENV>_USERINFO_METHOD)' : `${route.method} ${route.path}`;
  return `Calls the upstream \`${upstream}\` with the token of the user named by X-User-Id. Without X-User-Id, a tenant of design \`admin\` uses its admin connection; any other design answers 400 \`user_id_required\`.`;
}

function operation(route: FacadeRoute, method: string, path: string, depth: number): Operation {
  const params: Array<Record<string, unknown>> = [
    {
      name: 'tenantId',
      in: 'path',
      required: true,
      description: 'The tenant (a tenant key may call only its own).',
      schema: { type: 'string' },
    },
  ];
  for (const [, name] of path.matchAll(/\{(\w+)\}/g)) {
    params.push(
      /^path\d*$/.test(name)
        ? {
            name,
            in: 'path',
            required: true,
            description: `Segment ${name === 'path' ? 1 : name.slice(4)} of the upstream path (one plain segment: no encoded \`/\`, no dot segment).`,
            schema: { type: 'string' },
          }
        : { name, in: 'path', required: true, schema: { type: 'string' } },
    );
  }
  params.push(UPSTREAM_QUERY, {
    name: 'X-User-Id',
    in: 'header',
    required: false,
    description: "The partner's id of the acting user (required unless the tenant's design is `admin`; ignored on admin calls).",
    schema: { type: 'string' },
  });
  const op: Operation = {
    operationId: route.method === 'ANY' ? `${route.id}${depth > 1 ? depth : ''}_${method}` : route.id,
    summary: route.summary,
    description: `${tokenText(route)} An upstream 401 causes one token renewal and one retry (when the request body can be sent again). ${PASSED_THROUGH}`,
    tags: ['facade'],
    security: [{ bearer: [] }],
    parameters: params,
    responses: {
      [String(route.answer.status)]: upstreamAnswer(route.answer.description, route.answer.schema),
      ...Object.fromEntries(Object.entries(FACADE_ERRORS).map(([status, [name]]) => [status, { $ref: `#/components/responses/${name}` }])),
    },
  };
  if (route.streamed.length > 0 && method !== 'get' && method !== 'head') {
    const schema = { type: 'object', additionalProperties: true };
    op.requestBody = {
      required: false,
      description: "Streamed to the upstream unchanged (never held whole in memory); its fields are the upstream's.",
      content: Object.fromEntries(route.streamed.map((type) => [type, { schema }])),
    };
  }
  return op;
}

/**
 * How many segments of a `{path}` rest the document spells out. An OpenAPI path parameter holds one segment
 * (a `/` in its value is sent as `%2F`, which the facade refuses as not plain: upstream-path.ts), and a
 * validator matches a request segment by segment: a rest of n segments is the path `{path}/{path2}/…/{pathN}`.
 * Four cover every upstream path the spec shows (at most three segments, docs/upstream.md 4.2); longer paths
 * work the same and are simply not spelled out.
 */
export const DOCUMENTED_REST_SEGMENTS = 4;

/** The templates a route's path is documented under: itself, or for a `{path}` rest one per number of segments. */
function templates(route: FacadeRoute): string[] {
  if (!route.path.endsWith('/{path}')) return [route.path];
  return Array.from({ length: DOCUMENTED_REST_SEGMENTS }, (_, i) =>
    [route.path, ...Array.from({ length: i }, (_, k) => `{path${k + 2}}`)].join('/'),
  );
}

/** The facade's paths for the OpenAPI document, from the route table. */
export function facadePaths(): Record<string, Record<string, Operation>> {
  const paths: Record<string, Record<string, Operation>> = {};
  for (const route of FACADE_ROUTES) {
    templates(route).forEach((path, i) => {
      const item = (paths[`${TENANT_PREFIX}{tenantId}${path}`] ??= {});
      const methods = route.method === 'ANY' ? STANDARD_METHODS : [route.method.toLowerCase()];
      for (const method of methods) item[method] = operation(route, method, path, i + 1);
    });
  }
  return paths;
}

/** Adds the facade's paths to a document built from the Nest controllers. */
export function withFacadePaths(document: OpenAPIObject): OpenAPIObject {
  const paths = { ...document.paths };
  for (const [path, item] of Object.entries(facadePaths())) paths[path] = { ...paths[path], ...item };
  const tags = document.tags?.some((t) => t.name === 'facade')
    ? document.tags
    : [...(document.tags ?? []), { name: 'facade', description: 'Upstream calls with the right token (API.md section 7).' }];
  const components = { ...document.components, responses: { ...document.components?.responses, ...structuredClone(FACADE_RESPONSES) } };
  return { ...document, paths, tags, components };
}
