import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PartnerPage {
  /** This page's origin + `/`. */
  url: string;
  close(): Promise<void>;
}

/**
 * A partner's page on an origin of its own: imports the browser module from the service, connects with the
 * `connectUrl` in its query string (on a click, or at once with `auto=1`: no user gesture, so a popup
 * blocker blocks it), shows the outcome in #result and records every message it receives in
 * `window.messages`.
 */
export async function startPartnerPage(serviceUrl: string): Promise<PartnerPage> {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Partner</title></head><body>
<button id="connect" disabled>Connect</button>
<pre id="result"></pre>
<script type="module">
import { open, resultFromUrl } from ${JSON.stringify(`${serviceUrl}/sdk/connect-browser.js`)};
window.messages = [];
window.addEventListener('message', (e) => window.messages.push({ origin: e.origin, data: e.data }));
const show = (r) => { document.getElementById('result').textContent = JSON.stringify(r); };
const shown = (p) => p.then(show, (e) => show({ error: e.code, name: e.name, connectionId: e.connectionId }));
const back = resultFromUrl();
if (back) show(back instanceof Error ? { error: back.code, name: back.name } : back);
const params = new URL(location.href).searchParams;
const button = document.getElementById('connect');
button.addEventListener('click', () => shown(open(params.get('connectUrl'))));
button.disabled = false;
if (params.get('auto')) shown(open(params.get('connectUrl')));
</script></body></html>`;
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || !req.url?.startsWith('/')) return void res.writeHead(404).end();
    if (new URL(req.url, 'http://x').pathname !== '/') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(html);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
