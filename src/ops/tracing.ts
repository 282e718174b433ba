import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node';
import pg from 'pg';
import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { AppConfig, TracingConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { redactUrl } from './log-redaction.js';

/**
 * OpenTelemetry traces (docs/operations.md, "Traces"). Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then
 * no SDK is loaded into the request path, and every hook below costs one null check (`tracer === null`).
 *
 * What a span may carry is decided here: ids (tenant, connection, event, request), the environment, the
 * token kind, methods, statuses and paths run through the log redaction with their query strings dropped.
 * Never a header value, a body or a query string: those are where tokens, codes and states travel.
 */

interface Running {
  provider: NodeTracerProvider;
  pg: PgInstrumentation;
}

let tracer: Tracer | null = null;
let running: Running | null = null;
const w3c = new W3CTraceContextPropagator();

export const ATTR = {
  tenant: 'tenant.id',
  connection: 'connection.id',
  environment: 'cws.environment',
  tokenKind: 'cws.token_kind',
  requestId: 'cws.request_id',
  eventId: 'cws.event.id',
  eventType: 'cws.event.type',
} as const;

/** Whether spans are being made. The hot paths ask this before doing anything for tracing. */
export function tracingOn(): boolean {
  return tracer !== null;
}

/**
 * Starts the SDK: W3C trace context, spans batched to the OTLP endpoint, PostgreSQL calls (the official
 * instrumentation, patched onto the `pg` module the app loads) traced within a request, renewal or delivery.
 * One per process; `stopTracing` flushes and undoes it.
 */
export function startTracing(config: TracingConfig): void {
  if (running) return;
  const exporter =
    config.protocol === 'http/json'
      ? new OtlpJsonExporter({ url: config.endpoint, headers: config.headers })
      : new OtlpProtobufExporter({ url: config.endpoint, headers: config.headers });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: config.scheduleDelayMs })],
  });
  provider.register({ propagator: w3c });
  // Database spans only inside a traced operation: the job queue's and the scheduler's polling would otherwise be most of the trace volume.
  const instrumentation = new PgInstrumentation({ enabled: false, requireParentSpan: true, enhancedDatabaseReporting: false });
  instrumentation.setTracerProvider(provider);
  for (const definition of instrumentation.getModuleDefinitions()) if (definition.name === 'pg') definition.patch?.(pg, pgVersion());
  running = { provider, pg: instrumentation };
  tracer = provider.getTracer('cws-connect');
}

/** Starts tracing with the app when it is configured, and flushes the last spans when the app stops. */
@Injectable()
export class TracingLifecycle implements OnModuleInit, OnApplicationShutdown {
  private started = false;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  onModuleInit(): void {
    if (!this.config.tracing || tracingOn()) return;
    startTracing(this.config.tracing);
    this.started = true;
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.started) await stopTracing();
  }
}

/** Flushes what is buffered and removes the SDK (the app's shutdown). */
export async function stopTracing(): Promise<void> {
  const was = running;
  if (!was) return;
  tracer = null;
  running = null;
  for (const definition of was.pg.getModuleDefinitions()) if (definition.name === 'pg') definition.unpatch?.(pg, pgVersion());
  await was.provider.shutdown().catch(() => undefined);
  trace.disable();
  context.disable();
  propagation.disable();
}

function pgVersion(): string | undefined {
  return (pg as unknown as { version?: string }).version;
}

/**
 * An incoming request, served inside its server span (`serve` runs in the span's context). A `traceparent`
 * from the caller makes the span its child. Ends when the response is finished or the connection closes.
 */
export function traceRequest(req: IncomingMessage, res: ServerResponse, requestId: string, serve: () => void): void {
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
  if (tracer === null) return;
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

/** Adds attributes to the span of the operation in progress (the request, renewal or delivery). */
export function annotate(attributes: Attributes): void {
  if (tracer === null) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** The attributes of a call made with a connection's token; null when tracing is off (nothing allocated). */
export function connectionAttributes(tenantId: string, connectionId: string, environment: string, admin: boolean): Attributes | null {
  if (tracer === null) return null;
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

/** Runs `work` inside an internal span (a renewal): a root of its own unless an operation is in progress. */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
  errorOf: (e: unknown) => string = errorName,
): Promise<T> {
  if (tracer === null) return work();
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes });
  return context.with(trace.setSpan(context.active(), span), work).then(
    (value) => {
      span.end();
      return value;
    },
    (e: unknown) => {
      span.setAttribute('error.type', errorOf(e));
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      throw e;
    },
  );
}

/** A renewal that holds its connection's lease: its span parents the token call and the database calls. */
export function traceRenewal<T>(
  connection: { id: string; tenantId: string },
  environment: string | null,
  mode: string,
  work: () => Promise<T>,
): Promise<T> {
  if (tracer === null) return work();
  const attributes: Attributes = { [ATTR.tenant]: connection.tenantId, [ATTR.connection]: connection.id, 'cws.renewal.mode': mode };
  if (environment !== null) attributes[ATTR.environment] = environment;
  return inSpan('renewal', attributes, work);
}

/** The W3C `traceparent` of the operation in progress, to be stored with what it creates (an event); null when tracing is off or none is in progress. */
export function currentTraceparent(): string | null {
  if (tracer === null) return null;
  const carrier: Record<string, string> = {};
  w3c.inject(context.active(), carrier, defaultTextMapSetter);
  return carrier.traceparent ?? null;
}

/** The context a stored `traceparent` names (the parent of work done later for it), or undefined. */
export function contextOf(traceparent: string | null): Context | undefined {
  if (tracer === null || traceparent === null) return undefined;
  const ctx = w3c.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

const headersGetter = {
  get(carrier: IncomingHttpHeaders, key: string) {
    return carrier[key];
  },
  keys(carrier: IncomingHttpHeaders) {
    return Object.keys(carrier);
  },
};

/** A path as a span may hold it: no query string, secret segments redacted. */
function pathOf(url: string | undefined): string {
  if (!url) return '';
  const q = url.indexOf('?');
  return redactUrl(q < 0 ? url : url.slice(0, q)) ?? '';
}

function errorName(e: unknown): string {
  if (e && typeof e === 'object' && typeof (e as { code?: unknown }).code === 'string') return (e as { code: string }).code;
  return e instanceof Error ? e.name : 'unknown';
}
