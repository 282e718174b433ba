import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SinkDelivery {
  headers: IncomingHttpHeaders;
  raw: string;
  body: { type: string; timestamp: string; data: unknown };
  /** The status the sink answered. */
  status: number;
  /** When the request's body had arrived (Date.now()). */
  arrivedAt: number;
}

/**
 * A partner's events endpoint: records every request, answers `respond(n)` (default 200) for the n-th, once
 * `wait(n)` resolves (default at once: a slow partner otherwise).
 */
export class WebhookSink {
  readonly received: SinkDelivery[] = [];
  respond: (n: number) => number = () => 200;
  /** Extra response headers for the n-th request (e.g. Retry-After). */
  respondHeaders: (n: number) => Record<string, string> = () => ({});
  /** What the n-th request (`d`, recorded when it arrives) waits for before it is answered; null: nothing. */
  wait: (n: number, d: SinkDelivery) => Promise<unknown> | null = () => null;
  url = '';
  private server!: Server;
  private count = 0;

  static async start(): Promise<WebhookSink> {
    const sink = new WebhookSink();
    sink.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const n = sink.count++;
        const status = sink.respond(n);
        let body: SinkDelivery['body'];
        try {
          body = JSON.parse(raw) as SinkDelivery['body'];
        } catch {
          body = { type: '(not JSON)', timestamp: '', data: raw };
        }
        const delivery = { headers: req.headers, raw, body, status, arrivedAt: Date.now() };
        sink.received.push(delivery);
        const answer = () =>
          res.writeHead(status, { 'content-type': 'text/plain', ...sink.respondHeaders(n) }).end(status < 300 ? 'ok' : 'no');
        const until = sink.wait(n, delivery);
        if (until) void until.then(answer, answer);
        else answer();
      });
    });
    sink.server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => sink.server.listen(0, '127.0.0.1', resolve));
    sink.url = `http://127.0.0.1:${(sink.server.address() as AddressInfo).port}/cws-events`;
    return sink;
  }

  accepted(): SinkDelivery[] {
    return this.received.filter((d) => d.status >= 200 && d.status < 300);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

/** What a partner runs (docs/webhooks.md): Standard Webhooks verification with the tenant's events secret. */
export function verifySignature(secret: string, headers: IncomingHttpHeaders, raw: string): boolean {
  const id = String(headers['webhook-id'] ?? '');
  const ts = String(headers['webhook-timestamp'] ?? '');
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${raw}`).digest();
  return String(headers['webhook-signature'] ?? '')
    .split(' ')
    .some((part) => {
      const [version, mac] = part.split(',');
      const given = Buffer.from(mac ?? '', 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
}

export async function waitUntil<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 15_000, everyMs = 50): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v as NonNullable<T>;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
