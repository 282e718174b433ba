import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The API base the app is given: an upstream path prefix makes a step out of it observable. */
export const API_BASE = '/api/v1';

export interface RecordedCall {
  method: string;
  /** The request target as it arrived. */
  target: string;
  /** The sandbox user whose token it carried (null: none, or not a token of the sandbox). */
  user: string | null;
}

/**
 * An upstream in front of the sandbox that records every call and holds the app to two rules: nothing leaves
 * API_BASE, however a server might read the path (as sent, decoded, with `\` as `/`, with dots resolved), and
 * every call carries the token of the user the test expects (the admin's under /webhooks). A breach is a
 * violation; the suites fail on any. Calls to paths under HOLD are held open until released.
 */
export class RecordingUpstream {
  readonly calls: RecordedCall[] = [];
  readonly violations: string[] = [];
  /** The sandbox user expected on user routes; null: not checked (set-up, connect flows). */
  expectUser: string | null = null;
  /** The admin connection's sandbox user: the only token allowed under /webhooks. */
  adminUser = 'admin';
  target = '';
  private readonly held = new Set<ServerResponse>();
  private readonly users = new Map<string, Promise<string | null>>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<RecordingUpstream> {
    let self: RecordingUpstream | null = null;
    const server = createServer((req, res) => void self?.onRequest(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new RecordingUpstream(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return self;
  }

  /** Calls whose path starts with this (under the base) are held open until `release()`. */
  static readonly HOLD = '/workflows/hold-';

  get holding(): number {
    return this.held.size;
  }

  release(): void {
    for (const res of this.held) res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"released"}');
    this.held.clear();
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = req.url ?? '';
    const method = req.method ?? 'GET';
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? null;
    const user = token === null ? null : await this.userOf(token);
    this.calls.push({ method, target, user });

    const readings = readingsOf(target);
    const outside = readings.filter((p) => p !== API_BASE && !p.startsWith(`${API_BASE}/`));
    if (outside.length > 0) {
      this.violations.push(`${method} ${target} leaves ${API_BASE} (read as ${outside.join(', ')})`);
      res.writeHead(418).end();
      return;
    }
    const rest = readings.map((p) => p.slice(API_BASE.length).toLowerCase());
    const admin = rest.some((p) => p === '/webhooks' || p.startsWith('/webhooks/'));
    if (admin && user !== this.adminUser) this.violations.push(`${method} ${target} under /webhooks with ${user}'s token`);
    if (!admin && this.expectUser !== null && user !== this.expectUser) {
      this.violations.push(`${method} ${target} with ${user}'s token, not ${this.expectUser}'s`);
    }
    if (readings[0].startsWith(API_BASE + RecordingUpstream.HOLD)) {
      this.held.add(res);
      res.once('close', () => this.held.delete(res));
      req.resume();
      return;
    }
    this.forward(req, res, target.slice(API_BASE.length));
  }

  private forward(req: IncomingMessage, res: ServerResponse, path: string): void {
    const { hostname, port } = new URL(this.target);
    const headers = { ...req.headers, host: `${hostname}:${port}` };
    const out = httpRequest({ hostname, port, path, method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    req.pipe(out);
  }

  private userOf(token: string): Promise<string | null> {
    let found = this.users.get(token);
    if (!found) {
      found = fetch(`${this.target}/userinfo`, { headers: { authorization: `Bearer ${token}` } }).then(async (r) =>
        r.status === 200 ? String(((await r.json()) as { id: string }).id) : null,
      );
      this.users.set(token, found);
    }
    return found;
  }
}

/**
 * The ways a server could read a request target's path: as sent; as a WHATWG URL parser reads it (dots and
 * `%2e` resolved, `\` as `/`); and the same after one more decoding (a server that decodes before resolving).
 */
function readingsOf(target: string): string[] {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const out = [path];
  if (!path.startsWith('/')) return out;
  out.push(new URL(path, 'http://upstream').pathname);
  try {
    out.push(new URL(decodeURIComponent(path).replaceAll('\\', '/'), 'http://upstream').pathname);
  } catch {
    out.push('<undecodable>');
  }
  return out;
}
