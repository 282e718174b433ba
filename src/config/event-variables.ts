import { endpointDisableAfter } from './value-formats.js';
import { variable } from './variable.js';
import { int, parsedBy } from './variable-types.js';

// Events to the partner (docs/webhooks.md, docs/endpoints.md): the outbound delivery's retries and job queue, the
// inbound group commits, how long events are kept, and the bounds of the tenant's added endpoints.

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** Read at every start. */
export const EVENT_VARIABLES = {
  EVENTS_RETRY_BASE_MS: variable(
    'events to the partner',
    int(1, HOUR),
    10_000,
    'the first retry delay of an event delivery, ms, doubling per attempt up to `EVENTS_RETRY_MAX_MS`, with jitter (see `docs/webhooks.md`)',
  ),
  EVENTS_RETRY_MAX_MS: variable('events to the partner', int(1, DAY), HOUR, 'the longest delay between two delivery attempts, ms'),
  EVENTS_RETRY_SPAN_MS: variable(
    'events to the partner',
    int(0, 30 * DAY),
    DAY,
    'how long an event is retried before it is dead-lettered, ms',
  ),
  EVENTS_ATTEMPT_TIMEOUT_MS: variable('events to the partner', int(100, 10 * MINUTE), 15_000, "one delivery attempt's timeout, ms"),
  EVENTS_POLL_INTERVAL_MS: variable('events to the partner', int(500, MINUTE), 1000, 'how often delivery workers poll the job queue, ms'),
  EVENTS_RELAY_INTERVAL_MS: variable(
    'events to the partner',
    int(20, MINUTE),
    1000,
    'how often the relay moves new events to the job queue, ms',
  ),
  EVENTS_BATCH_SIZE: variable('events to the partner', int(1, 1000), 50, 'delivery jobs fetched per poll'),
  EVENTS_JOB_EXPIRE_SECONDS: variable(
    'events to the partner',
    int(1, 86_400),
    120,
    'a delivery job held by a killed instance is retried elsewhere after this many seconds',
  ),
  EVENTS_MAINTENANCE_SECONDS: variable('events to the partner', int(1, 3600), 60, "the job queue's (pg-boss) maintenance interval, s"),
  INBOUND_COMMITS_IN_FLIGHT: variable(
    'events to the partner',
    int(1, 8),
    1,
    'inbound group commits written at once, 1 to 8 (see `docs/webhooks.md`, Inbound): more hide a slow WAL flush, fewer spend less database CPU per delivery',
  ),
  EVENT_RETENTION_DAYS: variable(
    'events to the partner',
    int(1, 400),
    30,
    'days events and their delivery attempts are kept, unless a tenant sets its own `eventRetentionDays` (1–400); see `docs/data-retention.md`',
  ),

  ENDPOINT_DISABLE_AFTER: variable(
    'events to the partner',
    parsedBy(endpointDisableAfter),
    5 * DAY,
    'an added event endpoint whose every attempt has failed for this long (over at least 10 events) is disabled: `10s` to `365d` (see `docs/endpoints.md`)',
    { defaultText: '`5d`' },
  ),
  ENDPOINTS_PER_TENANT: variable(
    'events to the partner',
    int(1, 1000),
    20,
    'most event endpoints per tenant, eventsTargetUrl included (1–1000)',
  ),
} as const;
