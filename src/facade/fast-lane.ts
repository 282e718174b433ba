import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { Injectable } from '@nestjs/common';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { assignRequestId } from '../common/request-id.js';
import { ApiKeysService } from '../tenants/api-keys.service.js';
import { FacadeService, type FacadeTarget } from './facade.service.js';

export interface FastLaneRoute {
  tenantId: string;
  target: FacadeTarget;
}

const TENANTS_PREFIX = '/v1/tenants/';
const SAME: FacadeTarget = { kind: 'same', route: 'user' };
const USERINFO: FacadeTarget = { kind: 'userinfo' };
const PROXY: FacadeTarget = { kind: 'proxy' };

/**
 * The facade's routes served without Express and NestJS: on a proxied call their routing, guard, pipe
 * and response machinery cost more CPU than everything else together (docs/facade.md, Performance).
 *
 * It is the same call, not a second implementation: ApiKeysService.authorize (the guard's credential and
 * tenant-isolation rule), FacadeService.forward (routing, streaming, headers) and errorBody (the exception
 * filter's mapping). FacadeController stays the documented contract (OpenAPI) and serves whatever the fast
 * lane does not take: other methods (HEAD, OPTIONS), and paths in a form Express matches but this matcher
 * does not look at (percent-encoded, trailing slash, other letter case). test/facade-fast-lane.e2e-spec.ts
 * holds both paths to the same answers.
 */
@Injectable()
export class FacadeFastLane {
  constructor(
    private readonly keys: ApiKeysService,
    private readonly facade: FacadeService,
  ) {}

  /** Puts the fast lane in front of the server's request listeners (Express), which get what it does not take. */
  install(server: Server): void {
    const others = server.listeners('request') as RequestListener[];
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const route = fastLaneRoute(req);
      if (route !== null) {
        this.serve(req, res, route).catch(() => res.destroy()); // serve answers its own errors; this is a last resort
        return;
      }
      for (const listener of others) listener.call(server, req, res);
    });
  }

  private async serve(req: IncomingMessage, res: ServerResponse, route: FastLaneRoute): Promise<void> {
    const requestId = assignRequestId(req, res);
    (req as IncomingMessage & { id?: string }).id = requestId;
    try {
      await this.keys.authorize(req.headers.authorization, route.tenantId);
      await this.facade.forward(req, res, route.tenantId, route.target);
    } catch (e) {
      const { status, body, headers } = errorBody(e, requestId);
      if (status >= 500) logFailure(e, requestId);
      if (res.headersSent) {
        res.destroy(); // as AppExceptionFilter: a streamed answer already started
        return;
      }
      const json = JSON.stringify(body);
      res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) }).end(json);
    }
  }
}

/**
 * The facade route of a request, when its method and path are exactly one of FacadeController's;
 * null for anything else (Express then routes it). Only the plain form is taken: a path with `%`, `#`, an
 * empty segment or a trailing slash is left to Express, whose matching (decoding, case-insensitivity,
 * non-strict slashes) then decides as it always did.
 */
export function fastLaneRoute(req: IncomingMessage): FastLaneRoute | null {
  const url = req.url;
  if (url === undefined || !url.startsWith(TENANTS_PREFIX)) return null;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (path.includes('%') || path.includes('#')) return null;
  const slash = path.indexOf('/', TENANTS_PREFIX.length);
  if (slash <= TENANTS_PREFIX.length) return null;
  const tenantId = path.slice(TENANTS_PREFIX.length, slash);
  const target = targetOf(req.method, path.slice(slash + 1), req);
  return target === null ? null : { tenantId, target };
}

/** `rest`: the path after /v1/tenants/{tenantId}/, without the query. Mirrors FacadeController's routes. */
function targetOf(method: string | undefined, rest: string, req: IncomingMessage): FacadeTarget | null {
  if (rest.startsWith('proxy/')) {
    // @All('proxy/*path'): any method, a non-empty path.
    return rest.length > 'proxy/'.length && !rest.endsWith('/') && !rest.includes('//') ? PROXY : null;
  }
  if (rest === 'me') {
    // A GET /me with a body is left to Express, whose JSON parser reads it there (the path is not streamed).
    return method === 'GET' && req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined ? USERINFO : null;
  }
  if (rest === 'workflows') return method === 'GET' || method === 'POST' ? SAME : null;
  if (!rest.startsWith('workflows/')) return null;
  const parts = rest.split('/'); // ['workflows', id, ...]
  const id = parts[1];
  if (id === '') return null;
  if (parts.length === 2) return method === 'GET' || (method === 'POST' && id === 'async') ? SAME : null;
  if (parts.length !== 3) return null;
  if (parts[2] === 'approvals') return method === 'PATCH' ? SAME : null;
  if (parts[2] === 'upload-signed') return method === 'POST' ? SAME : null;
  return null;
}
