import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { AppError } from '../common/app-error.js';
import { answerError } from '../common/error-answer.js';
import { requestIdFor } from '../common/request-id.js';
import { setAnswerHeaders } from '../common/security-headers.js';
import { bindRequestContext, setRequestRoute, traceRequest } from '../telemetry/request-tracing.js';
import { tracingOn } from '../telemetry/tracing.js';
import type { FacadeDoor } from '../facade/facade-door.js';
import { matchRoute } from '../facade/facade-routes.js';
import { matchInbound, type InboundDoor } from '../webhooks/inbound-door.js';
import { matchMcp, type McpDoor } from '../agents/mcp-door.js';

/**
 * The HTTP server's one request listener: it mints the request id of every request (set on every answer, with
 * the security headers), serves the facade's routes through FacadeDoor, the inbound receiver through InboundDoor,
 * the MCP endpoint through McpDoor, and hands everything else to Express (the Nest app).
 */
export class FrontDoor {
  private facade: FacadeDoor | null = null;
  private inbound: InboundDoor | null = null;
  private mcp: McpDoor | null = null;

  constructor(private readonly express: RequestListener) {}

  /** The facade and the receiver are served once the Nest app is built (before the server listens). */
  open(facade: FacadeDoor, inbound: InboundDoor): void {
    this.facade = facade;
    this.inbound = inbound;
  }

  /** The MCP endpoint, once the OpenAPI document its tools are made from is built. */
  openMcp(mcp: McpDoor, document: object): void {
    mcp.open(document as Record<string, unknown>);
    this.mcp = mcp;
  }

  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = requestIdFor(req);
    (req as IncomingMessage & { id?: string }).id = requestId;
    if (tracingOn()) traceRequest(req, res, requestId, () => this.route(req, res, requestId));
    else this.route(req, res, requestId);
  };

  private route(req: IncomingMessage, res: ServerResponse, requestId: string): void {
    const url = req.url ?? '';
    const method = req.method ?? 'GET';
    const origin = url.charCodeAt(0) === 0x2f; /* '/' */
    const match = origin && this.facade !== null ? matchRoute(method, url).match : null;
    if (match !== null && this.facade !== null) {
      if (tracingOn()) setRequestRoute(req, `/v1/tenants/{tenantId}${match.route.path}`, match.tenantId);
      // The facade writes the request id and the security headers with each of its answers (FacadeDoor): set here,
      // one by one, they cost a proxied call more than its own headers.
      this.facade.serve(req, res, match, requestId); // answers its own errors
      return;
    }
    // Set before anything else can answer: Express's routes, the receiver's and the MCP endpoint's answers carry them.
    setAnswerHeaders(res, requestId);
    if (!origin) {
      // Absolute-form (`GET http://host/...`), authority- and asterisk-form targets are for proxies, not for this server.
      answerError(req, res, new AppError('invalid_path', 'The request target must be a path (origin form).'), requestId);
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
    const mcp = this.mcp !== null ? matchMcp(url) : null;
    if (mcp !== null && this.mcp !== null) {
      if (tracingOn()) {
        setRequestRoute(req, mcp === 'mcp' ? '/mcp' : '/.well-known/oauth-protected-resource/mcp', '');
        bindRequestContext(req, res);
      }
      this.mcp.serve(req, res, mcp, requestId).catch(() => res.destroy());
      return;
    }
    if (tracingOn()) bindRequestContext(req, res);
    this.express(req, res);
  }
}
