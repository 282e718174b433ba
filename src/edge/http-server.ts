import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { mintRequestId } from '../common/request-id.js';
import { SECURITY_HEADER_LINES } from '../common/security-headers.js';
import { StalledBodies } from '../common/stalled-body.js';
import type { AppConfig } from '../config/app-config.js';

/**
 * The HTTP server, with explicit timeouts (docs/security.md, "Timeouts and per-tenant limits"): headers must
 * arrive within HTTP_HEADERS_TIMEOUT_MS and a whole request within HTTP_REQUEST_TIMEOUT_MS; a connection with
 * no traffic either way for HTTP_IDLE_TIMEOUT_MS is closed, and an idle keep-alive one after
 * HTTP_KEEP_ALIVE_TIMEOUT_MS. A request the parser refuses gets the contract's JSON error, not Node's bare 400,
 * with the request id and the security headers of every answer.
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
      `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\nx-request-id: ${requestId}\r\n${SECURITY_HEADER_LINES}content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
    );
  });
  return server;
}

function clientErrorOf(code: string | undefined): [number, string, string] {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'The request did not arrive in time.'];
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'validation_failed', 'The request headers are too large.'];
  return [400, 'validation_failed', 'The request could not be parsed as HTTP.'];
}
