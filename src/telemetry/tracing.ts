import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import pg from 'pg';
import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import type { TracingConfig } from '../config/tracing-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { redactUrl } from './log-redaction.js';

/**
 * OpenTelemetry traces (docs/observability.md, "Traces"): the SDK's start and stop here, the hooks beside it
 * (request-tracing.ts: incoming requests; client-spans.ts: outgoing calls; operation-spans.ts: renewals and
 * the trace context stored with an event). Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then the SDK, its
 * exporters and the PostgreSQL instrumentation are not even loaded (a few hundred modules a start would pay
 * for), and every hook costs one null check (`activeTracer() === null`).
 *
 * What a span may carry is decided here and in those hooks: ids (tenant, connection, event, request), the environment, the
 * token kind, methods, statuses and paths run through the log redaction with their query strings dropped.
 * Never a header value, a body or a query string: those are where tokens, codes and states travel.
 */

interface Running {
  provider: NodeTracerProvider;
  pg: PgInstrumentation;
}

let tracer: Tracer | null = null;
let running: Running | null = null;
/** The one W3C trace context propagator (requests in, calls out, stored events). */
export const w3c = new W3CTraceContextPropagator();

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

/** The tracer while tracing is on, else null: every hook's one check. */
export function activeTracer(): Tracer | null {
  return tracer;
}

/**
 * Starts the SDK: W3C trace context, spans batched to the OTLP endpoint, PostgreSQL calls (the official
 * instrumentation, patched onto the `pg` module the app loads) traced within a request, renewal or delivery.
 * One per process; `stopTracing` flushes and undoes it.
 */
export async function startTracing(config: TracingConfig): Promise<void> {
  if (running) return;
  const [
    { OTLPTraceExporter: OtlpJsonExporter },
    { OTLPTraceExporter: OtlpProtobufExporter },
    { PgInstrumentation },
    { resourceFromAttributes },
    sdk,
  ] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/instrumentation-pg'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  if (running) return;
  const { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
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

  async onModuleInit(): Promise<void> {
    if (!this.config.tracing || tracingOn()) return;
    await startTracing(this.config.tracing);
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

/** A path as a span may hold it: no query string, secret segments redacted. */
export function pathOf(url: string | undefined): string {
  if (!url) return '';
  const q = url.indexOf('?');
  return redactUrl(q < 0 ? url : url.slice(0, q)) ?? '';
}
