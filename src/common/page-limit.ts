import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsOptional, ValidateBy } from 'class-validator';

/** A limit as a query string spells it: decimal digits only (no sign, exponent, hex, spaces or fraction). */
const DIGITS = /^[0-9]{1,6}$/;

/**
 * The `limit` of a list's query DTO: optional, decimal digits naming an integer from 1 to `max`; anything else
 * (`1e2`, `0x10`, ` 5`, `5.0`, a repeated parameter) is `validation_failed` with one message. `doc` is what the
 * OpenAPI document says of it: the default when the list states it in its schema, and a description other than
 * "Page size, 1 to max.".
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
    // Canonicalise, then decide: only the plain decimal spelling becomes a number; anything else stays as sent and fails.
    Transform(({ value }: { value: unknown }) => (typeof value === 'string' && DIGITS.test(value) ? Number(value) : value)),
    ValidateBy({
      name: 'pageLimit',
      validator: {
        validate: (value: unknown) => typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= max,
        defaultMessage: () => message,
      },
    }),
  );
}
