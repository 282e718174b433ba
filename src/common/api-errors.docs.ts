import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';

/** The contract's error body (API.md section 3), for the OpenAPI document. */
export const ERROR_BODY_SCHEMA = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'requestId'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, requestId: { type: 'string' } },
    },
  },
};

/** Documents error answers of a route: `{401: '`unauthorized`', 404: '`tenant_not_found`'}`. */
export function ApiErrors(errors: Record<number, string>): MethodDecorator & ClassDecorator {
  return applyDecorators(...Object.entries(errors).map(([status, codes]) => ApiResponse({ status: Number(status), description: `Error codes: ${codes}.`, schema: ERROR_BODY_SCHEMA })));
}
