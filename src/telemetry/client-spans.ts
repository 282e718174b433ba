import {
  context,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { activeTracer, ATTR, pathOf, w3c } from './tracing.js';

// Spans of outgoing HTTP calls (the upstream, the events targets): the URL without its query string, the trace
// context on the call's headers.

/** The attributes of a call made with a connection's token; null when tracing is off (nothing allocated). */
export function connectionAttributes(tenantId: string, connectionId: string, environment: string, admin: boolean): Attributes | null {
  if (activeTracer() === null) return null;
  return {
    [ATTR.tenant]: tenantId,
    [ATTR.connection]: connectionId,
    [ATTR.environment]: environment,
    [ATTR.tokenKind]: admin ? 'admin' : 'user',
  };
}

/**
 * A client span for an outgoing HTTP call, child of the operation in progress (or of `parent`); null when
 * tracing is off. `url` is logged without its query string.
 */
export function startClientSpan(name: string, method: string, url: string, attributes: Attributes | null, parent?: Context): Span | null {
  const tracer = activeTracer();
  if (tracer === null) return null;
  const span = tracer.startSpan(
    name,
    { kind: SpanKind.CLIENT, attributes: { 'http.request.method': method, 'url.full': pathOf(url) } },
    parent ?? context.active(),
  );
  if (attributes !== null) span.setAttributes(attributes);
  return span;
}

/** Sets `traceparent` (and `tracestate`) of `span` on outgoing headers, replacing any the caller sent. */
export function injectTraceContext(span: Span, headers: Record<string, string | string[]>): void {
  delete headers.traceparent;
  delete headers.tracestate;
  w3c.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
}

/** Ends a client span with the answer's status, or the error that stood for one. */
export function endClientSpan(span: Span | null, status: number | null, error?: unknown): void {
  if (span === null) return;
  if (status !== null) {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  if (error !== undefined) {
    // The error's kind only: messages may quote URLs.
    span.setAttribute('error.type', error instanceof Error ? ((error as NodeJS.ErrnoException).code ?? error.name) : 'unknown');
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
