import type { IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { answerError } from '../common/error-answer.js';
import { hasBody } from '../common/request-body.js';
import { setAnswerHeaders } from '../common/security-headers.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { accessLogLevel } from '../telemetry/logger.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import { AuthThrottle } from '../auth/auth-throttle.js';
import type { RouteMatch } from './facade-routes.js';
import { FacadeService, type FacadeCall } from './facade.service.js';
import { checkParam, checkUpstreamPath } from './upstream-path.js';
import { TenantLimits } from './tenant-limits.js';

const logger = new Logger('FacadeDoor');

/** Seconds a caller refused for a tenant bound is asked to wait. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Serves the facade's routes (facade-routes.ts) without Express and NestJS: on a proxied call their routing,
 * guard, pipe and response machinery cost more CPU than everything else together (docs/facade.md, Performance).
 * The rules are the app's own: ApiKeysService.authorize (the API-key guard's credential and tenant-isolation
 * rule), FacadeService (routing, streaming, headers), errorBody (the exception filter's mapping).
 */
@Injectable()
export class FacadeDoor {
  readonly limits: TenantLimits;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly keys: ApiKeysService,
    private readonly facade: FacadeService,
    private readonly throttle: AuthThrottle,
  ) {
    this.limits = new TenantLimits(config.http.tenantMaxInFlight, config.http.tenantMaxUploads);
  }

  /** Answers the call, errors included (never throws); no promise when the key, the route and the token are cached. */
  serve(req: IncomingMessage, res: ServerResponse, match: RouteMatch, requestId: string): void {
    const started = performance.now();
    const done = (error: unknown) => this.done(req, res, match, requestId, started, error);
    try {
      const tenant = checkParam(match.tenantId);
      if (!tenant.ok) {
        if (tenant.reason === 'nul') throw paramError(tenant.reason, 'tenantId');
        // Tenant ids are slugs, so no tenant has this id: after the credential check, the answer of an unknown tenant.
        this.authorize(req, match.tenantId).then(
          () => done(new AppError('tenant_not_found', 'No such tenant.')),
          (e: unknown) => done(e),
        );
        return;
      }
      // A cached tenant key on its own tenant's path passes without the throttle's promises: nothing to count.
      if (this.keys.cachedTenantKey(req.headers.authorization, tenant.value, req.socket) !== null) {
        this.pass(req, res, match, tenant.value, requestId, done);
        return;
      }
      this.authorize(req, tenant.value).then(
        () => this.pass(req, res, match, tenant.value, requestId, done),
        (e: unknown) => done(e),
      );
    } catch (e) {
      done(e);
    }
  }

  /** The credential has passed: the path's checks, the tenant's bounds, the call. */
  private pass(
    req: IncomingMessage,
    res: ServerResponse,
    match: RouteMatch,
    tenantId: string,
    requestId: string,
    done: (error: unknown) => void,
  ): void {
    let release: (() => void) | null;
    let call: FacadeCall;
    try {
      call = upstreamCall(match);
      release = this.limits.acquire(tenantId, match.route.streamed.length > 0 && hasBody(req));
      if (release === null) {
        res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
        throw new AppError(
          'too_many_requests',
          'This tenant has too many calls or uploads in flight; retry after the time in Retry-After.',
        );
      }
    } catch (e) {
      done(e);
      return;
    }
    this.facade.forward(req, res, tenantId, call, requestId, release, done);
  }

  /** The call's end on this side: its error answered (null: the answer is under way), the access log's line. */
  private done(req: IncomingMessage, res: ServerResponse, match: RouteMatch, requestId: string, started: number, error: unknown): void {
    if (error !== null) {
      try {
        if (errorBody(error, requestId).status >= 500) logFailure(error, requestId);
        if (res.headersSent) {
          res.destroy(); // as AppExceptionFilter: a streamed answer already started
          return;
        }
        setAnswerHeaders(res, requestId); // the front door left them to the facade's answer
        answerError(req, res, error, requestId);
      } catch {
        res.destroy(); // the last resort
        return;
      }
    }
    if (res.statusCode >= 400 && match.route.log === 'errors') {
      const level = accessLogLevel(res.statusCode);
      if (level !== 'info')
        logger[level]({ req, res, route: match.route.id, responseTime: Math.round(performance.now() - started) }, 'request completed');
    }
  }

  /** The guard's rule (ApiKeysService.authorize), under the same throttle of failed credentials per client. */
  private authorize(req: IncomingMessage, tenantId: string): Promise<unknown> {
    return this.throttle.apiCredential(req, (pastBound) => this.keys.authorize(req.headers.authorization, tenantId, pastBound));
  }
}

/** The upstream path (and raw query) of a matched route, checked; throws `invalid_path` or `validation_failed`. */
export function upstreamCall(match: RouteMatch): FacadeCall {
  for (const name in match.params) {
    const param = checkParam(match.params[name]);
    if (!param.ok) throw paramError(param.reason, name);
  }
  const { route } = match;
  if (route.upstream === 'same') return { route: 'user', path: match.path + match.query };
  if (route.upstream === 'userinfo') return { route: 'userinfo', path: `/userinfo${match.query}` };
  const verdict = checkUpstreamPath(match.rest);
  if (!verdict.ok) {
    throw new AppError(
      'invalid_path',
      verdict.reason === 'outside_base'
        ? 'The proxied path leaves the API base.'
        : 'The proxied path must be a plain relative path: no encoded separators, dot segments, backslashes, double encoding, control characters or empty segments.',
    );
  }
  // Decided on the canonical form: the path the upstream will see.
  const admin = verdict.segments[0].toLowerCase() === 'webhooks';
  return { route: admin ? 'admin' : 'user', path: `/${match.rest}${match.query}` };
}

function paramError(reason: 'nul' | 'not_plain', name: string): AppError {
  return reason === 'nul'
    ? new AppError('validation_failed', `The path parameter ${name} may not contain NUL.`)
    : new AppError('invalid_path', `The path parameter ${name} must be one plain path segment.`);
}
