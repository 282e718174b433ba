import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { Request } from 'express';
import { requestIdOf } from '../common/request-id.js';
import type { AuthenticatedRequest, Principal } from '../auth/auth.decorators.js';
import type { AuditActor } from './audit-entry.js';

/** Who is acting and in which request: what a service that records a change itself needs from the request. */
export interface AuditContext {
  actor: AuditActor;
  requestId: string;
}

/** The actor a principal stands for: a tenant key by its id, a console session by its id, the operator key as `operator`. */
export function actorOf(principal: Principal): AuditActor {
  if (principal.kind === 'tenant') return { kind: 'tenant_key', id: principal.keyId };
  return principal.consoleSessionId ? { kind: 'console', id: principal.consoleSessionId } : { kind: 'operator', id: 'operator' };
}

/** Null on a route without a principal (a public one). */
export function auditContextOf(req: Request): AuditContext | null {
  const principal = (req as AuthenticatedRequest).principal;
  return principal ? { actor: actorOf(principal), requestId: requestIdOf(req) } : null;
}

/** The request's AuditContext, for a handler whose service records the change in its own transaction. */
export const AuditBy = createParamDecorator((_: unknown, ctx: ExecutionContext): AuditContext => {
  const found = auditContextOf(ctx.switchToHttp().getRequest<Request>());
  if (!found) throw new Error('AuditBy used on a public route');
  return found;
});
