import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

/**
 * The `limit` of a list's query DTO: optional, an integer from 1 to `max`; anything else is `validation_failed`
 * with one message. `doc` is what the OpenAPI document says of it: the default when the list states it in its
 * schema, and a description other than "Page size, 1 to max.".
 */
export function PageLimit(max: number, doc: { default?: number; description?: string } = {}): PropertyDecorator {
  const message = `limit must be an integer between 1 and ${max}`;
  return applyDecorators(
    ApiPropertyOptional({
      description: doc.description ?? `Page size, 1 to ${max}.`,
      type: 'integer',
      ...(doc.default === undefined ? {} : { default: doc.default }),
      minimum: 1,
      maximum: max,
    }),
    IsOptional(),
    Type(() => Number),
    IsInt({ message }),
    Min(1, { message }),
    Max(max, { message }),
  );
}
