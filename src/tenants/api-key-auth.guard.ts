import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AppError } from '../common/app-error.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthenticatedRequest, OPERATOR_ONLY, PUBLIC_ROUTE } from './auth.decorators.js';

/**
 * Global and fail-closed: every route needs the operator key or a tenant key unless marked @Public().
 * Tenant isolation lives here, once: a tenant key on another tenant's path answers 404 tenant_not_found,
 * exactly as if that tenant did not exist.
 */
@Injectable()
export class ApiKeyAuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeysService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;
    const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
    const principal = await this.keys.authenticate(bearerOf(req.headers.authorization));
    req.principal = principal;
    if (principal.kind === 'operator') return true;

    const tenantId = typeof req.params?.tenantId === 'string' ? req.params.tenantId : undefined;
    if (tenantId !== undefined && tenantId !== principal.tenantId) {
      throw new AppError('tenant_not_found', 'No such tenant.');
    }
    if (this.reflector.getAllAndOverride<boolean>(OPERATOR_ONLY, targets)) {
      throw new AppError('forbidden', 'This route needs the operator key.');
    }
    return true;
  }
}

function bearerOf(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}
