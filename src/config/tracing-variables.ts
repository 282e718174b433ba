import { otlpHeaders } from './value-formats.js';
import { optional, variable } from './variable.js';
import { httpUrl, int, num, oneOf, onOff, parsedBy, text } from './variable-types.js';

// The standard OpenTelemetry variables this service honours (docs/observability.md, "Traces").

const MINUTE = 60_000;

/** Read at every start: whether tracing is on (an OTLP endpoint set, OTEL_SDK_DISABLED not). */
export const TRACING_SWITCH = {
  OTEL_SDK_DISABLED: variable('traces', onOff(), false, '`true` turns tracing off', { defaultText: '`false`' }),
  OTEL_EXPORTER_OTLP_ENDPOINT: optional(
    'traces',
    httpUrl(),
    'OpenTelemetry traces exported over OTLP/HTTP to this collector (`/v1/traces` is appended); W3C `traceparent` honoured in, sent to the upstream and with events (see `docs/observability.md`, "Traces")',
    { defaultText: 'unset: tracing off, no SDK started' },
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optional(
    'traces',
    httpUrl(),
    "the collector's traces URL as is, instead of `OTEL_EXPORTER_OTLP_ENDPOINT`",
    {
      defaultText: 'unset',
    },
  ),
} as const;

const PROTOCOL = oneOf(['http/protobuf', 'http/json'], { grpc: 'grpc is not supported: use http/protobuf (the default) or http/json' });

/** The settings of the export, read only when tracing is on. */
export const TRACING_VARIABLES = {
  OTEL_EXPORTER_OTLP_PROTOCOL: variable('traces', PROTOCOL, 'http/protobuf', 'the export protocol: `http/protobuf` or `http/json`'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: optional('traces', PROTOCOL, 'the export protocol of traces, over `OTEL_EXPORTER_OTLP_PROTOCOL`', {
    defaultText: '`OTEL_EXPORTER_OTLP_PROTOCOL`',
  }),
  OTEL_EXPORTER_OTLP_HEADERS: variable(
    'traces',
    parsedBy(otlpHeaders),
    {},
    'headers sent with each export, `name=value` pairs, comma separated, values percent-encoded (never logged)',
    { defaultText: 'none' },
  ),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optional(
    'traces',
    parsedBy(otlpHeaders),
    'headers sent with each export of traces, over `OTEL_EXPORTER_OTLP_HEADERS`',
    {
      defaultText: '`OTEL_EXPORTER_OTLP_HEADERS`',
    },
  ),
  OTEL_SERVICE_NAME: variable('traces', text(), 'cws-connect', 'the `service.name` of the spans'),
  OTEL_TRACES_SAMPLER: variable(
    'traces',
    oneOf(['parentbased_traceidratio', 'parentbased_always_on']),
    'parentbased_always_on',
    '`parentbased_always_on` (every trace) or `parentbased_traceidratio` (the fraction `OTEL_TRACES_SAMPLER_ARG` of new ones); a sampled caller is always followed',
  ),
  OTEL_TRACES_SAMPLER_ARG: variable('traces', num(0, 1), 1, 'the fraction of new traces kept with `parentbased_traceidratio`'),
  OTEL_BSP_SCHEDULE_DELAY: variable('traces', int(10, 10 * MINUTE), 5000, 'ms between exports'),
} as const;
