import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable, Logger } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AuthThrottle } from '../auth/auth-throttle.js';
import { bearerOf } from '../auth/api-keys.service.js';
import { AppError } from '../common/app-error.js';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { answerError } from '../common/error-answer.js';
import { parseJsonBody } from '../common/json-body.js';
import { readBodyText } from '../common/read-body.js';
import { accessLogLevel } from '../telemetry/logger.js';
import { AgentSessionsService, MCP_PATH } from './agent-sessions.service.js';
import { AgentToolCatalogue } from './agent-tool-catalogue.js';
import { JsonCallTransport } from './mcp-json-transport.js';
import { allowedOrigin, isPlainCall, isStreamingCall, noteOfClient, protectedResource } from './mcp-messages.js';
import { AgentAuth, McpToolServers } from './mcp-tool-server.js';

const logger = new Logger('McpDoor');

/** The largest JSON-RPC message taken (tool arguments are JSON; uploads are not tools). */
export const MCP_BODY_LIMIT = 1024 * 1024;
export const RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/mcp';

/** What the front door serves here: the MCP endpoint or its protected resource metadata (RFC 9728); null for anything else. */
export function matchMcp(url: string): 'mcp' | 'metadata' | null {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (path === MCP_PATH || path === `${MCP_PATH}/`) return 'mcp';
  if (path === RESOURCE_METADATA_PATH) return 'metadata';
  return null;
}

/**
 * The MCP endpoint (API.md section 10), served by the front door without Express: the Origin check (DNS
 * rebinding), the session token (by hash, cached, under the credential-failure throttle; anything else is 401
 * with the resource metadata's address), then the official SDK's server, stateless (any instance answers any call):
 * a plain call (tools/call, tools/list, ping; one JSON answer) on the instance's one server, anything else
 * (initialize, notifications, batches, a tool call that asks for progress, every malformed request) on a server and
 * a Streamable HTTP transport of its own, as the SDK's stateless example does.
 */
@Injectable()
export class McpDoor {
  /** The plain calls' one server's transport (connected in open). */
  private readonly plain = new JsonCallTransport();

  constructor(
    private readonly sessions: AgentSessionsService,
    private readonly catalogue: AgentToolCatalogue,
    private readonly servers: McpToolServers,
    private readonly throttle: AuthThrottle,
  ) {}

  /** The tools are made from the service's OpenAPI document, once, before the server listens (service.ts). */
  open(document: Record<string, unknown>): void {
    this.catalogue.load(document);
    void this.servers.create().connect(this.plain);
  }

  /** One request, from its first check to its answer. */
  async serve(req: IncomingMessage, res: ServerResponse, what: 'mcp' | 'metadata', requestId: string): Promise<void> {
    const started = performance.now();
    try {
      if (what === 'metadata') return this.metadata(req, res);
      if (!allowedOrigin(req.headers.origin, this.sessions.mcpUrl)) {
        throw new AppError('forbidden', 'This Origin may not call the MCP endpoint (DNS rebinding protection).');
      }
      const auth = await this.authenticate(req, res, requestId);
      if (req.method !== 'POST') {
        // Stateless: no stream opened by GET, no session to end with DELETE.
        res.setHeader('allow', 'POST');
        throw new AppError('method_not_allowed', 'The MCP endpoint takes POST only (stateless Streamable HTTP).');
      }
      const message = parseJsonBody(await readBodyText(req, req.headers['content-type'], MCP_BODY_LIMIT));
      const client = noteOfClient(message);
      if (client !== null) await this.sessions.noteClient(auth.session, client.urlElicitation);
      if (isPlainCall(req.headers, message)) {
        // The common case: the instance's one server answers it, through a transport that writes the answer (mcp-json-transport.ts).
        this.plain.deliver(message, res, auth);
      } else {
        // Everything else on a server and a Streamable HTTP transport of its own, stateless: the SDK answers it whole.
        const server = this.servers.create();
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: !isStreamingCall(message),
        });
        res.once('close', () => {
          // The caller left before its answer: stop the tool call (its signal). A finished request leaves nothing to close.
          if (!res.writableFinished) void server.close();
        });
        await server.connect(transport);
        // The transport hands `req.auth` to the handlers, as the SDK's bearer middleware sets it.
        await transport.handleRequest(Object.assign(req, { auth }), res, message);
      }
    } catch (e) {
      if (errorBody(e, requestId).status >= 500) logFailure(e, requestId);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      answerError(req, res, e, requestId);
    }
    if (res.statusCode >= 400) {
      const level = accessLogLevel(res.statusCode);
      if (level !== 'info')
        logger[level]({ req, res, route: 'mcp', responseTime: Math.round(performance.now() - started) }, 'request completed');
    }
  }

  /** The session of the request's bearer token; without one, a 401 that names the resource metadata. */
  private async authenticate(req: IncomingMessage, res: ServerResponse, requestId: string): Promise<AgentAuth> {
    const presented = bearerOf(req.headers.authorization);
    try {
      const session = await this.throttle.apiCredential(req, () => this.sessions.authenticate(presented));
      // A session is only ever found for a token presented.
      return new AgentAuth(presented ?? '', session, requestId);
    } catch (e) {
      if (e instanceof AppError && e.code === 'unauthorized') {
        const metadata = `${this.sessions.mcpUrl.slice(0, -MCP_PATH.length)}${RESOURCE_METADATA_PATH}`;
        res.setHeader(
          'www-authenticate',
          `Bearer resource_metadata="${metadata}"${presented === null ? '' : ', error="invalid_token", error_description="The token is not a live agent session of this service."'}`,
        );
      }
      throw e;
    }
  }

  private metadata(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      throw new AppError('method_not_allowed', 'The resource metadata is read with GET.');
    }
    const json = JSON.stringify(protectedResource(this.sessions.mcpUrl));
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(json),
      'cache-control': 'public, max-age=3600',
      'access-control-allow-origin': '*',
    });
    res.end(req.method === 'HEAD' ? undefined : json);
  }
}
