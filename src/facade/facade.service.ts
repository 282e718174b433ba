import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { RoutingService, type RouteKind, type RoutedRequest, type RoutedResponse } from '../routing/routing.service.js';
import { hasBody } from '../common/request-body.js';
import { UpstreamAbort, type Outcome, type UpstreamBody } from '../upstream/streamed-request.js';
import { ANSWER_HEADER_LIST, ANSWER_HEADER_NAMES } from '../common/security-headers.js';

/**
 * An upstream call the front door has resolved: whose token (`userinfo`: the user's, to the environment's
 * /userinfo with its configured method) and the path and raw query under the API base, already checked.
 */
export interface FacadeCall {
  route: RouteKind | 'userinfo';
  path: string;
}

// RFC 9110 7.6.1 hop-by-hop headers, plus what must never cross: the caller's credentials, cookies,
// the acting-user header, the host (undici sets the upstream's), and expect (undici refuses it).
const NOT_FORWARDED = new Set([
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
  'cookie',
  'set-cookie',
  'authorization',
  'x-user-id',
  'expect',
]);

/**
 * Streams a facade call to the upstream and the answer back: no body is read into memory, the raw query
 * string is passed untouched, and only end-to-end headers cross in either direction.
 */
@Injectable()
export class FacadeService {
  constructor(private readonly routing: RoutingService) {}

  /**
   * `requestId`: set on the answer with the security headers (the front door leaves them to the facade). `release`:
   * called once the response is closed, however the call ends (the tenant's bound, TenantLimits). `done`: called
   * once, when the answer's headers are written (null) or with the error to answer; no promise on the way when
   * all is cached (undici's handler writes the answer's headers and pipes its body).
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    tenantId: string,
    call: FacadeCall,
    requestId: string,
    release: () => void,
    done: (error: unknown) => void,
  ): void {
    // An UpstreamAbort as undici's abort signal: an AbortController costs an EventTarget per call, and
    // stream.pipeline another (plus a DOMException when it settles): both measurable on the hot path.
    const abort = new UpstreamAbort();
    let body: UpstreamBody | null = null;
    let gone = false;
    res.on('close', () => {
      release();
      if (res.writableFinished) return;
      gone = true; // the caller left: stop the upstream call, or its answer mid-body
      if (body) body.destroy();
      else abort.abort();
    });
    const userId = userIdOf(req);
    const route: RouteKind = call.route === 'userinfo' ? 'user' : call.route;
    const outcome: Outcome<RoutedResponse> = {
      answer: (upstream) => {
        const answer = upstream.body;
        body = answer;
        if (gone) {
          answer.destroy(); // nobody to answer
          done(null);
          return;
        }
        try {
          res.writeHead(upstream.status, answerHeaderList(upstream.headers, upstream.status, requestId));
        } catch (e) {
          answer.destroy(); // a header Node refuses to write: answered as an error instead
          done(e);
          return;
        }
        // The upstream broke off mid-body: the status line is out, so cutting the connection is the only honest signal left.
        answer.on('error', () => res.destroy());
        answer.pipe(res);
        done(null);
      },
      fail: (e) => done(gone ? null : e), // gone: nobody to answer
    };
    if (call.route !== 'userinfo') {
      this.routing.callTo(tenantId, route, userId, this.request(req, req.method ?? 'GET', call, abort), outcome);
      return;
    }
    this.routing.resolve(tenantId, route, userId).then(
      ({ env }) => this.routing.callTo(tenantId, route, userId, this.request(req, env.userinfoMethod, call, abort), outcome),
      (e: unknown) => outcome.fail(e),
    );
  }

  private request(req: IncomingMessage, method: string, call: FacadeCall, abort: UpstreamAbort): RoutedRequest {
    const withBody = hasBody(req);
    return {
      method,
      path: call.path,
      headers: forwardedRequestHeaders(req.headers),
      body: withBody && call.route !== 'userinfo' ? req : null,
      retry: !withBody && (method === 'GET' || method === 'HEAD'),
      signal: abort,
    };
  }
}

function userIdOf(req: IncomingMessage): string | undefined {
  const raw = req.headers['x-user-id'];
  if (typeof raw !== 'string') return undefined;
  const value = raw.trim();
  return value === '' ? undefined : value;
}

/** Names listed in Connection are hop-by-hop too (RFC 9110 7.6.1). */
function connectionNamed(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const joined = Array.isArray(value) ? value.join(',') : value;
  let named: Set<string> | null = null;
  for (const token of joined.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && name !== 'close' && name !== 'keep-alive') (named ??= new Set()).add(name);
  }
  return named;
}

export function forwardedRequestHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = connectionNamed(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || NOT_FORWARDED.has(name) || (named !== null && named.has(name))) continue;
    out[name] = value;
  }
  return out;
}

/**
 * A pass-through answer's headers as a raw header list (writeHead's flat array, no setHeader per header): the
 * request id and the security headers, then the upstream's end-to-end headers and x-upstream-status. An upstream
 * header of one of our names replaces ours, as it did when ours were set first and the upstream's over them.
 */
export function answerHeaderList(headers: IncomingHttpHeaders, status: number, requestId: string): Array<string | string[]> {
  const named = connectionNamed(headers.connection);
  const out: Array<string | string[]> = ANSWER_HEADER_LIST.slice();
  out[1] = requestId;
  const ours = out.length;
  let replaced = false;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || NOT_FORWARDED.has(name) || (named !== null && named.has(name))) continue;
    out.push(name, value);
    if (ANSWER_HEADER_NAMES.has(name)) replaced = true;
  }
  out.push('x-upstream-status', String(status));
  if (!replaced) return out;
  const upstream = new Set<string>();
  for (let i = ours; i < out.length; i += 2) upstream.add(out[i] as string);
  return out.filter((_, i) => i >= ours || !upstream.has((out[i - (i % 2)] as string).toLowerCase()));
}
