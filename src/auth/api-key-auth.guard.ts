import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AppError } from '../common/app-error.js';
import { ConsoleSessionsService, secretRefusedToConsole } from './console-sessions.service.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthenticatedRequest, OPERATOR_ONLY, PUBLIC_ROUTE, SHOWS_SECRET } from './auth.decorators.js';
import { AuthThrottle } from './auth-throttle.js';
import { credentialOf } from './request-credential.js';

/**
 * Global and fail-closed: every route needs the operator key or a tenant key unless marked @Public().
 * Tenant isolation is ApiKeysService.authorize's (a tenant key on another tenant's path: 404
 * tenant_not_found); the front door (edge/front-door.ts) applies the same method.
 */
@Injectable()
export class ApiKeyAuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeysService,
    private readonly consoleSessions: ConsoleSessionsService,
    private readonly throttle: AuthThrottle,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;
    const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
    const tenantId = typeof req.params?.tenantId === 'string' ? req.params.tenantId : undefined;
    // Usually settled already: a /v1 request is authenticated before its body is read (request-credential.ts).
    const credential = await credentialOf(req, { keys: this.keys, sessions: this.consoleSessions, throttle: this.throttle });
    if (credential.viaConsole && this.reflector.getAllAndOverride<boolean>(SHOWS_SECRET, targets) === true) throw secretRefusedToConsole();
    const principal = await this.keys.admit(credential.principal, tenantId);
    req.principal = principal;
    if (principal.kind === 'tenant' && this.reflector.getAllAndOverride<boolean>(OPERATOR_ONLY, targets)) {
      throw new AppError('forbidden', 'This route needs the operator key.');
    }
    return true;
  }
}
