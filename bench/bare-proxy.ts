// The facade's floor: a pass-through proxy in a few lines of node:http and undici's handler API (`dispatch`):
// no auth, no lookup, no body stream or promise per call, a fixed token. It does the pass-through work any proxy
// does, as the facade does it: the caller's end-to-end headers go to the upstream (hop-by-hop ones and the
// host dropped, the token set), and the upstream's status and end-to-end headers come back (so the same bytes
// cross both ways: the answer keeps its Content-Length rather than going chunked). Same upstream and the same
// socket pool as the service's (256 keep-alive connections, one request at a time each). The answer's chunks are
// written to the client as they arrive, with back-pressure (the upstream read pauses while the client's socket is
// full). What it leaves out is the facade's contract: credential, tenant bounds, request id, security headers,
// x-upstream-status.
// Run alone: TARGET=http://127.0.0.1:4010 TOKEN=... PORT=4020 npx tsx bench/bare-proxy.ts
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, type Dispatcher } from 'undici';

const target = new URL(process.env.TARGET ?? 'http://127.0.0.1:4010');
const token = process.env.TOKEN ?? '';
const agent = new Agent({ connections: 256, keepAliveTimeout: 10_000, pipelining: 1 });

/** RFC 9110 7.6.1's hop-by-hop headers, and the host (undici sets the upstream's). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

function proxy(req: IncomingMessage, res: ServerResponse): void {
  const method = (req.method ?? 'GET') as Dispatcher.HttpMethod;
  const headers = endToEnd(req.headers);
  headers.authorization = `Bearer ${token}`;
  agent.dispatch(
    {
      origin: target.origin,
      path: req.url ?? '/',
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' ? null : req,
    },
    {
      onRequestStart() {},
      onResponseStart(controller, statusCode, headers) {
        res.writeHead(statusCode, endToEnd(headers as IncomingHttpHeaders));
        res.on('drain', () => controller.resume());
      },
      onResponseData(controller, chunk) {
        if (!res.write(chunk)) controller.pause();
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      },
    },
  );
}

createServer(proxy).listen(Number(process.env.PORT ?? 4020), '127.0.0.1', () => console.log('bare proxy ready'));
