import type { OpenAPIObject } from '@nestjs/swagger';
import { ERROR_STATUS, type ErrorCode } from '../common/app-error.js';

/** The error component every controller's operations refer to (common/api-docs.ts, ErrorResponseDto). */
const ERROR_REF = { $ref: '#/components/schemas/ErrorResponseDto' };

function errors(...codes: ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      { description: list.map((c) => `\`${c}\``).join(', '), content: { 'application/json': { schema: ERROR_REF } } },
    ]),
  );
}

/** `POST /inbound/{tenantId}/{receiverId}`, served by the front door (inbound-door.ts), for the OpenAPI document. */
export function withInboundPath(document: OpenAPIObject): OpenAPIObject {
  const operation = {
    operationId: 'receiveDelivery',
    summary: 'Receive an upstream webhook delivery',
    description:
      'Called by the upstream, not by partners. Authenticated by the `Authorization` value the webhook was provisioned with (401 `unauthorized` when missing or wrong, or for an unknown receiver), not by an API key. The body must be `application/json` (415 otherwise), UTF-8, at most 1 MiB (413 `payload_too_large`); JSON nested too deeply or holding a NUL or an unpaired surrogate escape is 400 `validation_failed`. Nothing is stored on any error.',
    tags: ['webhooks'],
    security: [],
    parameters: [
      { name: 'tenantId', in: 'path' as const, required: true, schema: { type: 'string' } },
      { name: 'receiverId', in: 'path' as const, required: true, schema: { type: 'string' } },
    ],
    requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } } },
    responses: {
      '200': {
        description: 'Stored durably; `{"id"}` is the event id (webhook-id of the forwarded delivery).',
        content: {
          'application/json': { schema: { type: 'object', properties: { id: { type: 'string', format: 'uuid' } }, required: ['id'] } },
        },
      },
      ...errors(
        'validation_failed',
        'unauthorized',
        'payload_too_large',
        'unsupported_media_type',
        'secret_unreadable',
        'service_unavailable',
      ),
    },
  };
  return { ...document, paths: { ...document.paths, '/inbound/{tenantId}/{receiverId}': { post: operation } } };
}
