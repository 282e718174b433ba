import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request, Response } from 'express';
import { catchError, from, mergeMap, type Observable } from 'rxjs';
import { auditContextOf } from './audit-context.js';
import type { AuditOutcome } from './audit-entry.js';
import { AuditService } from './audit.service.js';
import { AUDITED, type AuditSpec } from './audited.decorator.js';

/**
 * Writes the row of an @Audited route once its handler is done, before the answer leaves: the change has
 * committed by then, so the row is written right after it (recordAfter never fails the request). Only
 * authenticated calls reach a handler; a refused credential is the guard's, and is not an action.
 */
@Injectable()
export class AuditInterceptor implements NestInterceptor {
  constructor(
    private readonly reflector: Reflector,
    private readonly audit: AuditService,
  ) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const spec = this.reflector.get<AuditSpec | undefined>(AUDITED, ctx.getHandler());
    if (!spec || ctx.getType() !== 'http') return next.handle();
    const req = ctx.switchToHttp().getRequest<Request>();
    const res = ctx.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      mergeMap((result) => from(this.write(spec, req, res.statusCode < 400 ? 'success' : 'failure', result).then(() => result))),
      catchError((e: unknown) =>
        from(
          this.write(spec, req, 'failure', undefined).then(() => {
            throw e;
          }),
        ),
      ),
    );
  }

  private async write(spec: AuditSpec, req: Request, outcome: AuditOutcome, result: unknown): Promise<void> {
    const by = auditContextOf(req);
    if (!by) return;
    const params = (req.params ?? {}) as Record<string, string>;
    // A failed call has no answer to describe: the path still names the tenant and, often, the target.
    const described = outcome === 'success' ? spec.describe(params, result) : safeDescribe(spec, params);
    await this.audit.recordAfter({ action: spec.action, ...by, ...described, userId: null, outcome });
  }
}

function safeDescribe(spec: AuditSpec, params: Record<string, string>) {
  try {
    return spec.describe(params, undefined);
  } catch {
    return { tenantId: params.tenantId ?? null, target: null };
  }
}
