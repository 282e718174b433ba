import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import {
  isUpstreamAnswer,
  UPSTREAM_SCHEMAS,
  UPSTREAM_STATUS_HEADER,
  upstreamErrorContent,
  upstreamStatusHeader,
} from '../upstream/upstream-openapi.js';
import { SHOWS_SECRET_EXTENSION } from '../common/api-docs.js';

/**
 * The rules that make the served OpenAPI document describe every operation the same way, whoever wrote the
 * route: applied to the whole document (Nest's controllers, the facade's route table, the inbound door), so a
 * new route is covered without writing these answers again. The document is OpenAPI 3.1 (JSON Schema 2020-12).
 */

type Json = Record<string, unknown>;
type Operation = Json & { responses: Record<string, Json>; security?: Json[]; 'x-shows-secret'?: boolean };

export const OPENAPI_VERSION = '3.1.0';

/** The console's session: its cookie and, with it, the session's CSRF token in a header (both required). */
export const CONSOLE_SECURITY_SCHEMES = {
  consoleSession: {
    type: 'apiKey',
    in: 'cookie',
    name: 'cws_console',
    description: 'The console session cookie (HttpOnly), set by `consoleSignIn`. Always together with `consoleCsrf`.',
  },
  consoleCsrf: {
    type: 'apiKey',
    in: 'header',
    name: 'x-csrf-token',
    description: "The session's CSRF token (from `consoleSignIn` or `consoleSession`), sent with the session cookie.",
  },
} as const;

const ERROR_REF = { $ref: '#/components/schemas/ErrorResponseDto' };
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const errorResponse = (description: string, headers?: Json): Json => ({
  description,
  ...(headers && { headers }),
  content: { 'application/json': { schema: ERROR_REF } },
});

function operations(document: OpenAPIObject): Operation[] {
  const found: Operation[] = [];
  for (const item of Object.values(document.paths ?? {}) as Json[]) {
    for (const method of METHODS) if (item[method]) found.push(item[method] as Operation);
  }
  return found;
}

const isBearerOnly = (security: Json[] | undefined) =>
  security?.length === 1 && Object.keys(security[0]).length === 1 && Array.isArray(security[0].bearer);

/**
 * Nest's operations pass the app-wide guard, which takes the operator key, a tenant key, or a console session
 * (cookie + CSRF header: API.md section 2, the console). A session without its CSRF token is 403 `forbidden`.
 * Operations marked with SHOWS_SECRET_EXTENSION take keys only.
 */
export function withConsoleSessions(document: OpenAPIObject): OpenAPIObject {
  for (const op of operations(document)) {
    const showsSecret = op[SHOWS_SECRET_EXTENSION] === true;
    delete op[SHOWS_SECRET_EXTENSION];
    if (!isBearerOnly(op.security) || showsSecret) continue;
    op.security = [{ bearer: [] }, { consoleSession: [], consoleCsrf: [] }];
    op.responses['403'] ??= errorResponse(
      '`forbidden`: a console session without its CSRF token in `x-csrf-token` (or a tenant key on an operator route).',
    );
  }
  return document;
}

/**
 * Nest's operations with a request body pass the one JSON body parser (common/json-body.ts): a body that is
 * not JSON (or nests too deeply, or holds a NUL) is 400 `validation_failed`, one over its limit 413.
 */
export function withBodyParserErrors(document: OpenAPIObject): OpenAPIObject {
  for (const op of operations(document)) {
    if (!op.requestBody) continue;
    op.responses['400'] ??= errorResponse('`validation_failed`: the body is not valid JSON.');
    op.responses['413'] ??= errorResponse('`payload_too_large`: the body is over its limit.');
  }
  return document;
}

/** Every answer the service and the upstream can give, declared; then the whole document as OpenAPI 3.1. */
export function finishDocument(document: OpenAPIObject): OpenAPIObject {
  const retryAfter = { 'retry-after': { description: 'Seconds to wait before trying again.', schema: { type: 'string' } } };
  for (const op of operations(document)) {
    if ((op.security?.length ?? 0) > 0) {
      // Every credential check reads the database: an outage answers 503 (docs/operations.md).
      op.responses['503'] ??= errorResponse('`service_unavailable`: the database cannot be reached; see Retry-After.', retryAfter);
      // Too many failed credentials from one client: its wrong ones are refused so, its right ones pass (docs/security.md).
      op.responses['429'] ??= errorResponse(
        '`too_many_requests`: too many failed credentials from this client; see Retry-After.',
        retryAfter,
      );
    }
    // A body that stops arriving is cut after HTTP_BODY_TIMEOUT_MS (common/stalled-body.ts).
    if (op.requestBody) op.responses['408'] ??= errorResponse('`request_timeout`: the request body stopped arriving.');
  }
  const components = (document.components ?? {}) as Json & { schemas?: Json; responses?: Record<string, Json>; securitySchemes?: Json };
  const shared = new Set<Json>();
  // Chosen before any is extended: a response object may be shared by several operations.
  const passing = operations(document).filter((op) => Object.values(op.responses).some(isUpstreamAnswer));
  for (const op of passing) withUpstreamErrors(op, components.responses ?? {}, shared);
  const finished = {
    ...document,
    openapi: OPENAPI_VERSION,
    components: {
      ...components,
      schemas: { ...components.schemas, ...structuredClone(UPSTREAM_SCHEMAS) },
      responses: { ...components.responses, ...structuredClone(UPSTREAM_RESPONSES) },
      securitySchemes: { ...components.securitySchemes, ...CONSOLE_SECURITY_SCHEMES },
    },
  };
  return toJsonSchema2020(finished) as OpenAPIObject;
}

/**
 * An operation that passes the upstream's answer through may answer any status the upstream gives, with the
 * upstream's body and `x-upstream-status` (API.md section 3). Statuses this service also uses for its own
 * errors take either body; the header tells them apart.
 */
function withUpstreamErrors(op: Operation, components: Record<string, Json>, shared: Set<Json>): void {
  const responses = op.responses;
  for (const [status, given] of Object.entries(responses)) {
    if (!/^[45]\d\d$/.test(status)) continue;
    // A shared answer (`components.responses`, used by pass-through operations only) is extended once.
    const name = typeof given.$ref === 'string' ? given.$ref.replace('#/components/responses/', '') : undefined;
    const response = name === undefined ? (responses[status] = structuredClone(given)) : components[name];
    if (response === undefined || isUpstreamAnswer(response) || shared.has(response)) continue;
    if (name !== undefined) shared.add(response);
    const content = response.content as Record<string, { schema?: Json }> | undefined;
    response.content = upstreamErrorContent(content?.['application/json']?.schema);
    response.headers = { ...(response.headers as Json | undefined), ...upstreamStatusHeader(false) };
    response.description = `${String(response.description).replace(/\.$/, '')}; or the upstream's answer with this status, passed through with \`${UPSTREAM_STATUS_HEADER}\`.`;
  }
  const success = Object.entries(responses).find(([status]) => /^2/.test(status));
  if (success && success[0] !== '2XX') {
    responses['2XX'] ??= { ...success[1], description: 'Another success status of the upstream, with the same body, passed through.' };
  }
  responses['3XX'] ??= { $ref: '#/components/responses/UpstreamRedirect' };
  responses['4XX'] ??= { $ref: '#/components/responses/UpstreamError' };
  responses['5XX'] ??= { $ref: '#/components/responses/UpstreamError' };
}

/** The upstream's answers every pass-through operation shares, written once in the document. */
const UPSTREAM_RESPONSES = {
  UpstreamRedirect: {
    description: 'A redirect of the upstream, passed through (never followed).',
    headers: upstreamStatusHeader(true),
  },
  UpstreamError: {
    description: "Any other error status of the upstream, with the upstream's body, passed through.",
    headers: upstreamStatusHeader(true),
    content: upstreamErrorContent(undefined),
  },
};

/** OpenAPI 3.0's `nullable` as JSON Schema 2020-12 says it: `null` among the types, or a `oneOf` with null. */
function toJsonSchema2020(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toJsonSchema2020);
  if (value === null || typeof value !== 'object') return value;
  const { nullable, ...rest } = value as Json;
  const out: Json = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, toJsonSchema2020(v)]));
  if (nullable !== true) return out;
  if (Array.isArray(out.enum)) out.enum = [...(out.enum as unknown[]), null];
  const allOf = out.allOf as Json[] | undefined;
  if (allOf?.length === 1 && out.properties === undefined) {
    // Nest writes a nullable reference as `allOf: [$ref]` beside `type: object`: `null` is then refused.
    const { allOf: _allOf, type: _type, ...annotations } = out;
    return { ...annotations, oneOf: [allOf[0], { type: 'null' }] };
  }
  if (typeof out.$ref === 'string') {
    const { $ref, ...annotations } = out;
    return { ...annotations, oneOf: [{ $ref }, { type: 'null' }] };
  }
  for (const key of ['oneOf', 'anyOf'] as const) {
    if (Array.isArray(out[key])) {
      out[key] = [...(out[key] as unknown[]), { type: 'null' }];
      return out;
    }
  }
  if (typeof out.type === 'string') out.type = [out.type, 'null'];
  else if (Array.isArray(out.type)) out.type = [...(out.type as unknown[]), 'null'];
  return out;
}

/**
 * The service's OpenAPI document, served at `/docs` (and `/docs-json`): Nest's routes, then the paths no
 * controller declares (the facade's, the inbound receiver's), the body parser's errors, the console's
 * session scheme, and the rules above. Answers the document (the MCP door makes its tools from it).
 */
export function serveApiDocs(app: INestApplication, extraPaths: Array<(document: OpenAPIObject) => OpenAPIObject>): OpenAPIObject {
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('cws-connect')
      .setDescription(
        'Connects a partner SaaS to the Contract Workflow Service: tenants, OAuth connections, a facade that calls the upstream with the right token, webhooks. Errors are `{"error": {"code", "message", "requestId"}}`.',
      )
      .setVersion('1')
      .addServer('/', 'this service')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'API key', description: 'The operator key or a tenant API key.' })
      .build(),
  );
  const withPaths = extraPaths.reduce((doc, add) => add(doc), withBodyParserErrors(withConsoleSessions(document)));
  const finished = finishDocument(withPaths);
  SwaggerModule.setup('docs', app, finished, { jsonDocumentUrl: 'docs-json' });
  return finished;
}
