import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { assignRequestId, mintRequestId } from '../common/request-id.js';
import { setSecurityHeaders } from '../common/security-headers.js';
import { StalledBodies } from '../common/stalled-body.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { accessLogLevel } from '../telemetry/logger.js';
import { bindRequestContext, setRequestRoute, traceRequest } from '../telemetry/request-tracing.js';
import { tracingOn } from '../telemetry/tracing.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import { AuthThrottle, clientOf, throttled } from '../auth/auth-throttle.js';
import { matchInbound, type InboundDoor } from '../webhooks/inbound-door.js';
import { matchRoute, type RouteMatch } from './facade-routes.js';
import { FacadeService, type FacadeCall } from './facade.service.js';
import { checkParam, checkUpstreamPath } from './upstream-path.js';
import { TenantLimits } from './tenant-limits.js';

const logger = new Logger('FrontDoor');

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

  async serve(req: IncomingMessage, res: ServerResponse, match: RouteMatch, requestId: string): Promise<void> {
    const started = performance.now();
    try {
      const tenant = checkParam(match.tenantId);
      if (!tenant.ok) {
        if (tenant.reason === 'nul') throw paramError(tenant.reason, 'tenantId');
        // Tenant ids are slugs, so no tenant has this id: after the credential check, the answer of an unknown tenant.
        await this.authorize(req, match.tenantId);
        throw new AppError('tenant_not_found', 'No such tenant.');
      }
      await this.authorize(req, tenant.value);
      const call = upstreamCall(match);
      const release = this.limits.acquire(tenant.value, match.route.streamed.length > 0 && hasBody(req));
      if (release === null) {
        res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
        throw new AppError(
          'too_many_requests',
          'This tenant has too many calls or uploads in flight; retry after the time in Retry-After.',
        );
      }
      res.once('close', release);
      await this.facade.forward(req, res, tenant.value, call);
    } catch (e) {
      if (errorBody(e, requestId).status >= 500) logFailure(e, requestId);
      if (res.headersSent) {
        res.destroy(); // as AppExceptionFilter: a streamed answer already started
        return;
      }
      answerError(req, res, e, requestId);
    }
    if (res.statusCode >= 400 && match.route.log === 'errors') {
      const level = accessLogLevel(res.statusCode);
      if (level !== 'info')
        logger[level]({ req, res, route: match.route.id, responseTime: Math.round(performance.now() - started) }, 'request completed');
    }
  }

  /** The guard's rule (ApiKeysService.authorize), under the same limiter of failed keys per client. */
  private authorize(req: IncomingMessage, tenantId: string): Promise<unknown> {
    return throttled(this.throttle.apiKeys, clientOf(req), () => this.keys.authorize(req.headers.authorization, tenantId));
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

function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * The HTTP server's one request listener: it mints the request id of every request, serves the facade's
 * routes through FacadeDoor and the inbound receiver through InboundDoor, and hands everything else to
 * Express (the Nest app).
 */
export class FrontDoor {
  private facade: FacadeDoor | null = null;
  private inbound: InboundDoor | null = null;

  constructor(private readonly express: RequestListener) {}

  /** The facade and the receiver are served once the Nest app is built (before the server listens). */
  open(facade: FacadeDoor, inbound: InboundDoor): void {
    this.facade = facade;
    this.inbound = inbound;
  }

  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = assignRequestId(req, res);
    (req as IncomingMessage & { id?: string }).id = requestId;
    setSecurityHeaders(req, res);
    if (tracingOn()) traceRequest(req, res, requestId, () => this.route(req, res, requestId));
    else this.route(req, res, requestId);
  };

  private route(req: IncomingMessage, res: ServerResponse, requestId: string): void {
    const url = req.url ?? '';
    if (url.charCodeAt(0) !== 0x2f /* '/' */) {
      // Absolute-form (`GET http://host/...`), authority- and asterisk-form targets are for proxies, not for this server.
      answerError(req, res, new AppError('invalid_path', 'The request target must be a path (origin form).'), requestId);
      return;
    }
    const method = req.method ?? 'GET';
    const { match } = matchRoute(method, url);
    if (match !== null && this.facade !== null) {
      if (tracingOn()) setRequestRoute(req, `/v1/tenants/{tenantId}${match.route.path}`, match.tenantId);
      this.facade.serve(req, res, match, requestId).catch(() => res.destroy()); // serve answers its own errors; this is a last resort
      return;
    }
    const delivery = this.inbound !== null ? matchInbound(method, url) : null;
    if (delivery !== null && this.inbound !== null) {
      if (tracingOn()) {
        setRequestRoute(req, '/inbound/{tenantId}/{receiverId}', delivery.tenantId);
        bindRequestContext(req, res); // the body arrives in socket events, outside the span's context
      }
      this.inbound.serve(req, res, delivery, requestId, (e) => answerError(req, res, e, requestId)).catch(() => res.destroy());
      return;
    }
    if (tracingOn()) bindRequestContext(req, res);
    this.express(req, res);
  }
}

/** The contract's error answer, written with node:http. */
function answerError(req: IncomingMessage, res: ServerResponse, e: unknown, requestId: string): void {
  const { status, body, headers: extra } = errorBody(e, requestId);
  const json = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    ...extra,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
  };
  // Refused before its body was read: the rest of that body would be taken for the next request on the connection.
  if (hasBody(req) && !req.complete) headers.connection = 'close';
  res.writeHead(status, headers).end(json);
}

/**
 * The HTTP server, with explicit timeouts (docs/security.md, "Timeouts and per-tenant limits"): headers must
 * arrive within HTTP_HEADERS_TIMEOUT_MS and a whole request within HTTP_REQUEST_TIMEOUT_MS; a connection with
 * no traffic either way for HTTP_IDLE_TIMEOUT_MS is closed, and an idle keep-alive one after
 * HTTP_KEEP_ALIVE_TIMEOUT_MS. A request the parser refuses gets the contract's JSON error, not Node's bare 400.
 */
export function createHttpServer(config: AppConfig, listener: RequestListener): Server {
  const { headersTimeoutMs, requestTimeoutMs, idleTimeoutMs, keepAliveTimeoutMs } = config.http;
  // A body that stops arriving is cut after HTTP_BODY_TIMEOUT_MS, a steady one never (common/stalled-body.ts).
  const stalled = new StalledBodies(config.http.bodyTimeoutMs);
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      keepAliveTimeout: keepAliveTimeoutMs,
      // How often Node checks the two timeouts above (30 s by default, which would let a slow sender live that much longer).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(headersTimeoutMs / 4))),
    },
    (req, res) => {
      stalled.watch(req, res);
      listener(req, res);
    },
  );
  server.on('close', () => stalled.stop());
  server.setTimeout(idleTimeoutMs); // no 'timeout' listener: Node destroys the idle socket
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const [status, code, message] = clientErrorOf(err.code);
    const requestId = mintRequestId();
    const json = JSON.stringify({ error: { code, message, requestId } });
    const reason = status === 408 ? 'Request Timeout' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request';
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\nx-request-id: ${requestId}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
    );
  });
  return server;
}

function clientErrorOf(code: string | undefined): [number, string, string] {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'The request did not arrive in time.'];
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'validation_failed', 'The request headers are too large.'];
  return [400, 'validation_failed', 'The request could not be parsed as HTTP.'];
}
