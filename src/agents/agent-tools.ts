import { TENANT_PREFIX } from '../facade/facade-routes.js';
import { isUpstreamAnswer } from '../upstream/upstream-openapi.js';

// The agent's tools, made from the OpenAPI document (the contract) once at start: every operation under
// /v1/tenants/{tenantId} that passes an upstream answer back becomes a tool, its operationId the tool's name,
// its summary and description the tool's description, its path parameters, query and JSON body the input
// schema, its success answer the output schema. Written once here, not tool by tool (docs/agents.md, "Tools").

type Json = Record<string, unknown>;

export const TOOL_GROUPS = ['read', 'write', 'admin'] as const;
export type ToolGroup = (typeof TOOL_GROUPS)[number];

/** The groups a session gets when it names none. */
export const DEFAULT_GROUPS: readonly ToolGroup[] = ['read', 'write'];

/** Tags of the operations that need the tenant's admin connection (the upstream's admin-only endpoints). */
const ADMIN_TAGS = new Set(['webhooks']);

/** How a tool reaches the upstream. */
export type ToolTarget =
  /** A facade route: the route table decides the upstream path (facade-routes.ts); the session user's token. */
  | { kind: 'facade'; method: string; path: string; params: string[]; query: boolean; body: boolean }
  /** The webhooks module's provisioning (the admin connection). */
  | { kind: 'webhooks'; op: 'create' | 'list' }
  /** Several calls in one tool (composed-tools.ts). */
  | { kind: 'composed'; name: string }
  /** The session user's synced copy (record-tools.ts): no upstream call. */
  | { kind: 'records'; op: 'list' | 'get' };

/** A tool as MCP lists it (tools/list), and what runs it. */
export interface AgentTool {
  name: string;
  group: ToolGroup;
  definition: {
    name: string;
    title: string;
    description: string;
    inputSchema: Json;
    outputSchema?: Json;
    annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  };
  target: ToolTarget;
}

/** An operation that is not a tool, and why (docs/agents.md lists them). */
export interface SkippedOperation {
  operationId: string;
  reason: string;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** The tools of a document (and the operations left out), in the document's order. */
export function toolsFromDocument(document: Json): { tools: AgentTool[]; skipped: SkippedOperation[] } {
  const schemas = ((document.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
  const tools: AgentTool[] = [];
  const skipped: SkippedOperation[] = [];
  const prefix = `${TENANT_PREFIX}{tenantId}`;
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Json>)) {
    if (!path.startsWith(`${prefix}/`)) continue;
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (op === undefined) continue;
      const operationId = String(op.operationId);
      const success = successOf(op);
      if (success === null) continue; // not an upstream call: the partner's own API (sessions, keys, events...)
      const local = path.slice(prefix.length);
      if (/\{path\d*\}/.test(local)) {
        skipped.push({ operationId, reason: 'the generic proxy: any upstream path, no typed contract and no fixed token (by path)' });
        continue;
      }
      const body = requestBodyOf(op);
      if (body === 'not-json') {
        skipped.push({ operationId, reason: 'takes a multipart upload only, which MCP tool arguments (JSON) cannot carry' });
        continue;
      }
      const tags = (op.tags as string[] | undefined) ?? [];
      const admin = tags.some((t) => ADMIN_TAGS.has(t));
      const group: ToolGroup = admin ? 'admin' : method === 'get' ? 'read' : 'write';
      const params = pathParams(op);
      const query = hasUpstreamQuery(op);
      const target: ToolTarget = admin
        ? { kind: 'webhooks', op: method === 'post' ? 'create' : 'list' }
        : { kind: 'facade', method: method.toUpperCase(), path: local, params, query, body: body !== null };
      tools.push({
        name: operationId,
        group,
        target,
        definition: {
          name: operationId,
          title: String(op.summary ?? operationId),
          description: describe(op, group),
          inputSchema: inputSchema(op, params, query, body === null ? null : inline(body, schemas)),
          outputSchema: outputSchema(inline(success, schemas)),
          annotations: {
            title: String(op.summary ?? operationId),
            readOnlyHint: method === 'get',
            destructiveHint: false,
            idempotentHint: method === 'get',
            openWorldHint: true,
          },
        },
      });
    }
  }
  return { tools, skipped };
}

/** The schema of the upstream answer of an operation's first numbered 2xx response, or null when it answers none. */
function successOf(op: Json): Json | null {
  for (const [status, response] of Object.entries((op.responses ?? {}) as Record<string, Json>)) {
    if (!/^2\d\d$/.test(status) || !isUpstreamAnswer(response)) continue;
    const content = response.content as Record<string, { schema?: Json }> | undefined;
    return content?.['application/json']?.schema ?? {};
  }
  return null;
}

/** The JSON body's schema; null without a body; `not-json` when the body cannot be JSON. */
function requestBodyOf(op: Json): Json | null | 'not-json' {
  const content = (op.requestBody as Json | undefined)?.content as Record<string, { schema?: Json }> | undefined;
  if (content === undefined) return null;
  const json = content['application/json'];
  return json === undefined ? 'not-json' : (json.schema ?? { type: 'object' });
}

function parametersOf(op: Json): Json[] {
  return (op.parameters as Json[] | undefined) ?? [];
}

function pathParams(op: Json): string[] {
  return parametersOf(op)
    .filter((p) => p.in === 'path' && p.name !== 'tenantId')
    .map((p) => String(p.name));
}

function hasUpstreamQuery(op: Json): boolean {
  return parametersOf(op).some((p) => p.in === 'query' && p.name === 'upstreamQuery');
}

function describe(op: Json, group: ToolGroup): string {
  const who =
    group === 'admin'
      ? "Runs with the tenant's admin connection (the session needs the admin grant)."
      : "Runs as the session's user, with that user's permissions upstream.";
  const summary = String(op.summary ?? '');
  const detail = typeof op.description === 'string' ? ` ${firstSentences(op.description)}` : '';
  return `${summary}.${detail} ${who} The result is the upstream's status and answer.`.replace(/\.\./g, '.');
}

/** The first two sentences: the OpenAPI descriptions also speak of headers and API keys an agent never sees. */
function firstSentences(text: string): string {
  const plain = text.replace(/X-User-Id/g, 'the acting user');
  return (plain.match(/[^.]+\./g) ?? [plain]).slice(0, 1).join('').trim();
}

function inputSchema(op: Json, params: string[], query: boolean, body: Json | null): Json {
  const properties: Record<string, Json> = {};
  for (const p of parametersOf(op)) {
    if (p.in !== 'path' || !params.includes(String(p.name))) continue;
    properties[String(p.name)] = { type: 'string', minLength: 1, ...(p.description ? { description: p.description } : {}) };
  }
  if (query)
    properties.query = {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'Query parameters passed to the upstream untouched (its own names; the upstream documents none).',
    };
  if (body !== null) properties.body = { ...body, description: (body.description as string | undefined) ?? 'The request body, as JSON.' };
  const required = [...params, ...(body !== null && op.requestBody && (op.requestBody as Json).required ? ['body'] : [])];
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

/** Every tool answers an object (MCP's structuredContent): the upstream's status and its body. */
function outputSchema(body: Json): Json {
  return {
    type: 'object',
    properties: {
      status: { type: 'integer', description: "The upstream's HTTP status." },
      body,
    },
    required: ['status', 'body'],
  };
}

/** A schema with every `#/components/schemas/...` reference replaced by its target (tools carry no components). */
export function inline(schema: Json, schemas: Record<string, Json>, depth = 0): Json {
  if (depth > 16) return {};
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object') return value;
    const obj = value as Json;
    if (typeof obj.$ref === 'string') {
      const name = obj.$ref.replace('#/components/schemas/', '');
      const { $ref: _ref, ...rest } = obj;
      const target = schemas[name];
      return target === undefined ? rest : { ...inline(target, schemas, depth + 1), ...rest };
    }
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, walk(v)]));
  };
  return walk(schema) as Json;
}
