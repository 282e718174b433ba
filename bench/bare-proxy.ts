// The facade's floor: a pass-through proxy in a few lines of node:http and undici's handler API (`dispatch`):
// no auth, no lookup, no body stream or promise per call, a fixed token. The answer's chunks are written to the
// client as they arrive, with back-pressure (the upstream read pauses while the client's socket is full).
// Run alone: TARGET=http://127.0.0.1:4010 TOKEN=... PORT=4020 npx tsx bench/bare-proxy.ts
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, type Dispatcher } from 'undici';

const target = new URL(process.env.TARGET ?? 'http://127.0.0.1:4010');
const token = process.env.TOKEN ?? '';
const agent = new Agent({ connections: 256, keepAliveTimeout: 10_000 });

function proxy(req: IncomingMessage, res: ServerResponse): void {
  const method = (req.method ?? 'GET') as Dispatcher.HttpMethod;
  agent.dispatch(
    {
      origin: target.origin,
      path: req.url ?? '/',
      method,
      headers: { accept: req.headers.accept ?? '*/*', authorization: `Bearer ${token}` },
      body: method === 'GET' || method === 'HEAD' ? null : req,
    },
    {
      onRequestStart() {},
      onResponseStart(controller, statusCode, headers) {
        res.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/octet-stream') });
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
