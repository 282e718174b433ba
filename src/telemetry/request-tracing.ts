import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { activeTracer, ATTR, pathOf, w3c } from './tracing.js';

// The server span of each incoming request, named by its route template once the response is finished.

/**
 * An incoming request, served inside its server span (`serve` runs in the span's context). A `traceparent`
 * from the caller makes the span its child. Ends when the response is finished or the connection closes.
 */
export function traceRequest(req: IncomingMessage, res: ServerResponse, requestId: string, serve: () => void): void {
  const tracer = activeTracer();
  if (tracer === null) return serve();
  const parent = w3c.extract(ROOT_CONTEXT, req.headers, headersGetter);
  const method = req.method ?? 'GET';
  const span = tracer.startSpan(
    method,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': pathOf(req.url), [ATTR.requestId]: requestId } },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  res.once('close', () => {
    const route = routeOf(req);
    if (route !== null) {
      span.setAttribute('http.route', route);
      span.updateName(`${method} ${route}`);
    }
    const tenantId = tenantOf(req);
    if (tenantId !== undefined) span.setAttribute(ATTR.tenant, tenantId);
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    if (!res.writableFinished) span.setAttribute('cws.aborted', true);
    span.end();
  });
  context.with(ctx, serve);
}

type Routed = IncomingMessage & { cwsRoute?: string; cwsTenant?: string; params?: Record<string, unknown> };

/**
 * Keeps the request's and response's listeners in its span's context: Express reads the body from events
 * the socket emits (outside any context), then runs the handler from them. The facade needs none of it (its
 * work follows from promises), so only requests handed to Express pay for the wrapped listeners.
 */
export function bindRequestContext(req: IncomingMessage, res: ServerResponse): void {
  if (activeTracer() === null) return;
  const ctx = context.active();
  context.bind(ctx, req);
  context.bind(ctx, res);
}

/** Names a facade request's route template and tenant (Express routes are read from the request at the end). */
export function setRequestRoute(req: IncomingMessage, route: string, tenantId: string): void {
  (req as Routed).cwsRoute = route;
  (req as Routed).cwsTenant = tenantId;
}

function tenantOf(req: IncomingMessage): string | undefined {
  const routed = req as Routed;
  if (routed.cwsTenant !== undefined) return routed.cwsTenant;
  const param = routed.params?.tenantId;
  return typeof param === 'string' ? param : undefined;
}

function routeOf(req: IncomingMessage): string | null {
  const facade = (req as Routed).cwsRoute;
  if (facade !== undefined) return facade;
  const express = req as IncomingMessage & { route?: { path?: unknown }; baseUrl?: string };
  return typeof express.route?.path === 'string' ? `${express.baseUrl ?? ''}${express.route.path}` : null;
}

const headersGetter = {
  get(carrier: IncomingHttpHeaders, key: string) {
    return carrier[key];
  },
  keys(carrier: IncomingHttpHeaders) {
    return Object.keys(carrier);
  },
};
