import { applyDecorators, Header } from '@nestjs/common';
import { DECORATORS } from '@nestjs/swagger';

/** A route's deprecation, declared once on its handler with `@Deprecated(...)` (docs/operations.md, "Releases"). */
export interface Deprecation {
  /** When the route became deprecated: the `Deprecation` header (RFC 9745), `@<unix seconds>`. */
  since: Date;
  /** When it stops answering: the `Sunset` header (RFC 8594), an HTTP-date. */
  sunset?: Date;
  /** Where a caller reads what to use instead: `Link: <...>; rel="deprecation"`. */
  link?: string;
}

/** The answer headers of a deprecated route. */
export function deprecationHeaders({ since, sunset, link }: Deprecation): Record<string, string> {
  const headers: Record<string, string> = { deprecation: `@${Math.floor(since.getTime() / 1000)}` };
  if (sunset) headers.sunset = sunset.toUTCString();
  if (link) headers.link = `<${link}>; rel="deprecation"`;
  return headers;
}

/**
 * Marks a route deprecated: its answers carry the headers above, and its operation in the OpenAPI document says
 * `deprecated: true` (merged into the route's own @ApiOperation, in whichever order the two are written).
 */
export function Deprecated(deprecation: Deprecation): MethodDecorator {
  const markDocument: MethodDecorator = (_target, _key, descriptor) => {
    const handler = descriptor.value as object;
    const operation = (Reflect.getMetadata(DECORATORS.API_OPERATION, handler) ?? {}) as Record<string, unknown>;
    Reflect.defineMetadata(DECORATORS.API_OPERATION, { ...operation, deprecated: true }, handler);
    return descriptor;
  };
  return applyDecorators(...Object.entries(deprecationHeaders(deprecation)).map(([name, value]) => Header(name, value)), markDocument);
}
