/**
 * The upstream's answers as the OpenAPI document describes them: the shapes docs/upstream.md shows, left open
 * (other properties allowed, nothing required) wherever it says "not shown". Every operation that passes an
 * upstream answer through declares it with `upstreamAnswer`; the document's finisher (ops/openapi-document.ts)
 * then adds the upstream's error answers to it, so a new pass-through route is described the same way.
 */

/** The response header that marks an answer as the upstream's (API.md section 3). */
export const UPSTREAM_STATUS_HEADER = 'x-upstream-status';

const ref = (name: keyof typeof UPSTREAM_SCHEMAS) => ({ $ref: `#/components/schemas/${name}` });
const OPEN_OBJECT = { type: 'object', additionalProperties: true };

export const UPSTREAM_SCHEMAS = {
  UpstreamWorkflow: {
    type: 'object',
    description:
      'A workflow as the upstream answers it. The spec shows only these document properties (docs/upstream.md 2.4), and does not promise them on every answer; its other fields are not shown and are passed through as they come.',
    properties: {
      versionNumber: { type: 'number', description: 'The version of the document.' },
      lastModified: {
        type: ['string', 'number'],
        description: 'When the document was last modified: a timestamp, whose format the spec does not show.',
      },
      Author: {
        type: 'object',
        additionalProperties: true,
        description: 'Present once a document was modified; there are several author types with differing information.',
      },
    },
    additionalProperties: true,
  },
  UpstreamWorkflowList: {
    description:
      "The workflows the token's user may see, as the upstream answers them: the spec does not show the envelope (a list, or an object holding one).",
    oneOf: [{ type: 'array', items: { $ref: '#/components/schemas/UpstreamWorkflow' } }, OPEN_OBJECT],
  },
  UpstreamWebhook: {
    type: 'object',
    description:
      'A webhook as the upstream answers it: the fields of its creation payload (docs/upstream.md 2.3), Authorization values redacted; its other fields are not shown and are passed through.',
    properties: {
      events: { type: 'array', items: { type: 'string' } },
      targetURL: { type: 'string' },
      headers: { type: 'object', additionalProperties: { type: 'string' } },
    },
    additionalProperties: true,
  },
  UpstreamWebhookList: {
    description: "The upstream's webhooks: the spec does not show the envelope (a list, or an object holding one).",
    oneOf: [{ type: 'array', items: { $ref: '#/components/schemas/UpstreamWebhook' } }, OPEN_OBJECT],
  },
  UpstreamUserInfo: {
    ...OPEN_OBJECT,
    description:
      "The token's user: its id, e-mail, username, other profile details and the granted scopes (docs/upstream.md 2.6); the field names are not shown.",
  },
  UpstreamObject: { ...OPEN_OBJECT, description: "The upstream's answer, passed through: its fields are not shown." },
  UpstreamError: {
    type: 'object',
    description:
      'An error answer of the upstream, passed through unchanged (with `x-upstream-status`). The spec shows no error format; OAuth 2.0 style upstreams (and the sandbox) send `{"error": "<code>", "error_description": "..."}`.',
    properties: {
      error: { description: "The upstream's error code (a string in the OAuth 2.0 style)." },
      error_description: { type: 'string' },
    },
    additionalProperties: true,
  },
} as const;

export type UpstreamSchemaName = keyof typeof UPSTREAM_SCHEMAS;

/** The `x-upstream-status` header: required on answers that only the upstream gives. */
export function upstreamStatusHeader(required: boolean): Record<string, unknown> {
  return {
    [UPSTREAM_STATUS_HEADER]: {
      required,
      description: required
        ? "The upstream's status: this answer is the upstream's, passed through."
        : "Present when the answer is the upstream's, passed through (then the body is the upstream's); absent on this service's own errors.",
      schema: { type: 'string' },
    },
  };
}

/**
 * A success answer passed through from the upstream, with the schema of its body; `any`: whatever the upstream
 * answers (the generic proxy), JSON of any shape or another media type.
 */
export function upstreamAnswer(description: string, schema: UpstreamSchemaName | 'any'): Record<string, unknown> {
  return {
    description: `${description} Passed through from the upstream with \`${UPSTREAM_STATUS_HEADER}\`.`,
    headers: upstreamStatusHeader(true),
    content:
      schema === 'any'
        ? {
            'application/json': { schema: { description: 'Any JSON value.' } },
            '*/*': { schema: { type: 'string', description: 'A body that is not JSON, as the upstream sent it.' } },
          }
        : { 'application/json': { schema: ref(schema) } },
  };
}

/** Whether a response object is one of the upstream's (declared with `upstreamAnswer`). */
export function isUpstreamAnswer(response: unknown): boolean {
  const headers = (response as { headers?: Record<string, unknown> } | undefined)?.headers;
  return headers !== undefined && UPSTREAM_STATUS_HEADER in headers;
}

/** Content of an answer that may be the upstream's error: its JSON (ours or the upstream's), or any other text. */
export function upstreamErrorContent(ours: Record<string, unknown> | undefined): Record<string, unknown> {
  return {
    'application/json': { schema: ours ? { anyOf: [ours, ref('UpstreamError')] } : ref('UpstreamError') },
    '*/*': { schema: { type: 'string', description: 'A body that is not JSON, as the upstream sent it.' } },
  };
}
