import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
} from '@opentelemetry/api';
import { activeTracer, ATTR, w3c } from './tracing.js';

// Spans of the service's own operations (a renewal), attributes added to the operation in progress, and the trace
// context stored with what it creates (an event), resumed when that is delivered.

/** Adds attributes to the span of the operation in progress (the request, renewal or delivery). */
export function annotate(attributes: Attributes): void {
  if (activeTracer() === null) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** Runs `work` inside an internal span (a renewal): a root of its own unless an operation is in progress. */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
  errorOf: (e: unknown) => string = errorName,
): Promise<T> {
  const tracer = activeTracer();
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
  if (activeTracer() === null) return work();
  const attributes: Attributes = { [ATTR.tenant]: connection.tenantId, [ATTR.connection]: connection.id, 'cws.renewal.mode': mode };
  if (environment !== null) attributes[ATTR.environment] = environment;
  return inSpan('renewal', attributes, work);
}

/** The W3C `traceparent` of the operation in progress, to be stored with what it creates (an event); null when tracing is off or none is in progress. */
export function currentTraceparent(): string | null {
  if (activeTracer() === null) return null;
  const carrier: Record<string, string> = {};
  w3c.inject(context.active(), carrier, defaultTextMapSetter);
  return carrier.traceparent ?? null;
}

/** The trace id of the operation in progress (an audit row names it); null when tracing is off or none is in progress. */
export function currentTraceId(): string | null {
  if (activeTracer() === null) return null;
  return trace.getActiveSpan()?.spanContext().traceId ?? null;
}

/** The context a stored `traceparent` names (the parent of work done later for it), or undefined. */
export function contextOf(traceparent: string | null): Context | undefined {
  if (activeTracer() === null || traceparent === null) return undefined;
  const ctx = w3c.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

function errorName(e: unknown): string {
  if (e && typeof e === 'object' && typeof (e as { code?: unknown }).code === 'string') return (e as { code: string }).code;
  return e instanceof Error ? e.name : 'unknown';
}

/** What a sync run did, filled in as it goes and set on its span when it ends (counts and an outcome, never content). */
export interface SyncRunFigures {
  pages: number;
  changes: number;
  outcome: string;
}

/**
 * One sync run of a user's copy (docs/records.md): `sync.listing` (the whole GET /workflows) or `sync.read` (one
 * workflow an inbound event named), whose upstream and database calls are its children. A root span, or a child of
 * `parent` (the inbound delivery that named the workflow). Attributes: tenant, connection, pages, changes, outcome.
 */
export function traceSyncRun<T>(
  kind: 'listing' | 'read',
  owner: { tenantId: string; connectionId: string },
  parent: Context | undefined,
  work: (run: SyncRunFigures) => Promise<T>,
): Promise<T> {
  const run: SyncRunFigures = { pages: 0, changes: 0, outcome: 'unknown' };
  const tracer = activeTracer();
  if (tracer === null) return work(run);
  const span = tracer.startSpan(
    `sync.${kind}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: { [ATTR.tenant]: owner.tenantId, [ATTR.connection]: owner.connectionId, 'cws.sync.kind': kind },
    },
    parent ?? ROOT_CONTEXT,
  );
  const end = (): void => {
    span.setAttributes({ 'cws.sync.pages': run.pages, 'cws.sync.changes': run.changes, 'cws.sync.outcome': run.outcome });
    if (run.outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  return context
    .with(trace.setSpan(parent ?? ROOT_CONTEXT, span), () => work(run))
    .then(
      (value) => {
        end();
        return value;
      },
      (e: unknown) => {
        run.outcome = 'failed';
        span.setAttribute('error.type', errorName(e));
        end();
        throw e;
      },
    );
}
