import type { OpenAPIObject } from '@nestjs/swagger';

/** The error component every operation refers to (common/api-docs.ts, ErrorResponseDto). */
const ERROR_REF = { $ref: '#/components/schemas/ErrorResponseDto' };
const error = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers && { headers }),
  content: { 'application/json': { schema: ERROR_REF } },
});

const WWW_AUTHENTICATE = {
  'www-authenticate': {
    required: true,
    description:
      '`Bearer resource_metadata="<PUBLIC_URL>/.well-known/oauth-protected-resource/mcp"` (RFC 9728), with `error="invalid_token"` when a token was sent.',
    schema: { type: 'string' },
  },
};

const JSON_RPC = {
  type: 'object',
  description: 'A JSON-RPC 2.0 message of the Model Context Protocol (initialize, ping, tools/list, tools/call, notifications...).',
  properties: { jsonrpc: { const: '2.0' }, id: { type: ['string', 'integer'] }, method: { type: 'string' }, params: { type: 'object' } },
  required: ['jsonrpc'],
  additionalProperties: true,
};

/**
 * `POST /mcp` and its protected resource metadata, served by the front door (mcp-door.ts), for the OpenAPI
 * document, as far as OpenAPI can say it: the protocol itself is MCP's (docs/agents.md).
 */
export function withMcpPaths(document: OpenAPIObject): OpenAPIObject {
  const mcp = {
    operationId: 'mcp',
    summary: 'The Model Context Protocol endpoint for AI agents (Streamable HTTP, stateless)',
    description:
      "An agent session's token (`cwsag_…`, from createAgentSession) in `Authorization: Bearer`. Protocol versions 2025-06-18 and 2025-11-25 (and older ones the SDK negotiates). `Accept: application/json, text/event-stream`. Answers JSON, or an event stream for a tool call that asks for progress. GET and DELETE answer 405 (no server-side session). A request with an `Origin` of another host is 403 `forbidden`. The tools are listed by `tools/list`: one per facade and webhook operation of this document, plus `launchWorkflowAndWait`.",
    tags: ['agents'],
    security: [{ agentSession: [] }],
    requestBody: { required: true, content: { 'application/json': { schema: JSON_RPC } } },
    responses: {
      '200': {
        description: 'The JSON-RPC answer (a tool error is a result with `isError: true`).',
        content: { 'application/json': { schema: JSON_RPC }, 'text/event-stream': { schema: { type: 'string' } } },
      },
      '202': { description: 'A notification or a response, accepted.' },
      '400': error('`validation_failed`: the body is not JSON; or a JSON-RPC error answer of the transport.'),
      '401': error('`unauthorized`: no agent session token, or one that is unknown, expired or revoked.', WWW_AUTHENTICATE),
      '403': error("`forbidden`: an Origin that is not this service's host (DNS rebinding protection)."),
      '406': { description: 'The Accept header names neither JSON nor an event stream (JSON-RPC error body).' },
      '413': error('`payload_too_large`: a message over 1 MiB.'),
      '415': error('`unsupported_media_type`: a body that is not UTF-8 JSON.'),
    },
  };
  const metadata = {
    operationId: 'mcpResourceMetadata',
    summary: 'The protected resource metadata of the MCP endpoint (RFC 9728)',
    tags: ['agents'],
    security: [],
    responses: {
      '200': {
        description: 'Names the resource (`<PUBLIC_URL>/mcp`) and how its token is sent.',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: {
                resource: { type: 'string', format: 'uri' },
                resource_name: { type: 'string' },
                bearer_methods_supported: { type: 'array', items: { type: 'string' } },
                resource_documentation: { type: 'string', format: 'uri' },
              },
              required: ['resource', 'bearer_methods_supported'],
            },
          },
        },
      },
    },
  };
  const securitySchemes = {
    ...document.components?.securitySchemes,
    agentSession: {
      type: 'http' as const,
      scheme: 'bearer',
      bearerFormat: 'agent session token (cwsag_…)',
      description: 'An agent session token.',
    },
  };
  return {
    ...document,
    paths: {
      ...document.paths,
      '/mcp': { post: mcp },
      '/.well-known/oauth-protected-resource/mcp': { get: metadata },
    } as OpenAPIObject['paths'],
    components: { ...document.components, securitySchemes },
  };
}
