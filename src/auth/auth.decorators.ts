import { applyDecorators, createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import { ApiExtension } from '@nestjs/swagger';
import type { Request } from 'express';
import { SHOWS_SECRET_EXTENSION } from '../common/api-docs.js';

/** The operator, by its key or by a console session (`consoleSessionId`: which one, for the audit trail); or a tenant key. */
export type Principal = { kind: 'operator'; consoleSessionId?: string } | { kind: 'tenant'; tenantId: string; keyId: string };

export const PUBLIC_ROUTE = 'cws:public';
export const OPERATOR_ONLY = 'cws:operator-only';
export const SHOWS_SECRET = 'cws:shows-secret';

/** Reachable without an API key (health, docs, the browser's connect and callback, inbound deliveries). */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** Only the operator key; a tenant key on its own tenant gets 403, on another tenant 404. */
export const OperatorOnly = () => SetMetadata(OPERATOR_ONLY, true);

/**
 * The answer shows a secret once (a key, an events secret): refused to a console session, which never holds one.
 * The OpenAPI document then names the keys only (ops/openapi-document.ts, withConsoleSessions).
 */
export const ShowsSecret = () => applyDecorators(SetMetadata(SHOWS_SECRET, true), ApiExtension(SHOWS_SECRET_EXTENSION, true));

export interface AuthenticatedRequest extends Request {
  principal?: Principal;
}

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const principal = ctx.switchToHttp().getRequest<AuthenticatedRequest>().principal;
  if (!principal) throw new Error('CurrentPrincipal used on a public route');
  return principal;
});
