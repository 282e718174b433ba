import { applyDecorators } from '@nestjs/common';
import { ApiOperation, ApiProperty, ApiResponse } from '@nestjs/swagger';
import { ERROR_STATUS, type ErrorCode } from './app-error.js';

export class ErrorBodyDto {
  @ApiProperty({ description: 'A stable snake_case code, e.g. `tenant_not_found`.', example: 'validation_failed' })
  code: string;

  @ApiProperty({ description: 'A sentence for a person.' })
  message: string;

  @ApiProperty({ description: 'The same value as the `x-request-id` response header.' })
  requestId: string;
}

/** Every error this service produces (API.md section 3). */
export class ErrorResponseDto {
  @ApiProperty({ type: ErrorBodyDto })
  error: ErrorBodyDto;
}

/**
 * An operation of the public API: a stable operationId (the name a generated client gives the call) and a
 * one-line summary.
 */
export function ApiRoute(operationId: string, summary: string, description?: string): MethodDecorator {
  return ApiOperation({ operationId, summary, ...(description && { description }) });
}

/**
 * The error answers an operation can give, by code: one response per status, in the contract's error
 * shape, listing its codes. The status comes from the code (ERROR_STATUS), so the two cannot disagree.
 */
export function ApiErrors(...codes: ErrorCode[]): MethodDecorator & ClassDecorator {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  return applyDecorators(
    ...[...byStatus].map(([status, list]) =>
      ApiResponse({ status, description: list.map((c) => `\`${c}\``).join(', '), type: ErrorResponseDto }),
    ),
  );
}

/** Marks a guarded operation whose answer shows a secret once: a console session may not call it (bearer only). */
export const SHOWS_SECRET_EXTENSION = 'x-shows-secret';
