// The baseline: a pass-through proxy in a few lines of node:http and undici. No auth, no lookup, a fixed token.
// Run alone: TARGET=http://127.0.0.1:4010 TOKEN=... PORT=4020 npx tsx bench/bare-proxy.ts
import { createServer } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Agent, type Dispatcher } from 'undici';

const target = new URL(process.env.TARGET ?? 'http://127.0.0.1:4010');
const token = process.env.TOKEN ?? '';
const agent = new Agent({ connections: 256, keepAliveTimeout: 10_000 });

createServer(async (req, res) => {
  try {
    const up = await agent.request({
      origin: target.origin,
      path: req.url ?? '/',
      method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
      headers: { accept: req.headers.accept ?? '*/*', authorization: `Bearer ${token}` },
      body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
    });
    res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/octet-stream') });
    await pipeline(up.body, res);
  } catch {
    if (!res.headersSent) res.writeHead(502).end();
    else res.destroy();
  }
}).listen(Number(process.env.PORT ?? 4020), '127.0.0.1', () => console.log('bare proxy ready'));
