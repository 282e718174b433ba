import { TRACING_VARIABLES } from './tracing-variables.js';
import { stripSlash } from './value-formats.js';
import { readVariables, type Env, type Values } from './variable.js';
import type { SERVICE_VARIABLES } from './variables.js';

// OpenTelemetry trace export (docs/observability.md, "Traces") as the typed config reads it from OTEL_*
// (tracing-variables.ts).

export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  endpoint: string;
  protocol: 'http/protobuf' | 'http/json';
  /** OTEL_EXPORTER_OTLP_HEADERS (a collector's credentials, typically): sent with each export, never logged. */
  headers: Record<string, string>;
  serviceName: string;
  /** Fraction of new traces kept; a caller's sampled traceparent is always followed. */
  sampleRatio: number;
  scheduleDelayMs: number;
}

/** Tracing is on when an OTLP endpoint is set and OTEL_SDK_DISABLED is not; only then are the other OTEL_* read. */
export function readTracing(env: Env, v: Values<typeof SERVICE_VARIABLES>, production: boolean): TracingConfig | null {
  if (v.OTEL_SDK_DISABLED) return null;
  const base = v.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!base && !v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return null;
  const t = readVariables(env, TRACING_VARIABLES, production);
  return {
    endpoint: v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${stripSlash(base ?? '')}/v1/traces`,
    protocol: t.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? t.OTEL_EXPORTER_OTLP_PROTOCOL,
    headers: t.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? t.OTEL_EXPORTER_OTLP_HEADERS,
    serviceName: t.OTEL_SERVICE_NAME,
    sampleRatio: t.OTEL_TRACES_SAMPLER === 'parentbased_traceidratio' ? t.OTEL_TRACES_SAMPLER_ARG : 1,
    scheduleDelayMs: t.OTEL_BSP_SCHEDULE_DELAY,
  };
}
