/** An added event endpoint as stored (event_endpoints; docs/endpoints.md). */
export interface EndpointRow {
  id: string;
  tenantId: string;
  url: string;
  description: string | null;
  eventTypes: string[] | null;
  filter: unknown;
  rateLimitPerSecond: number | null;
  maxInFlight: number;
  disabled: boolean;
  /** `request` (PATCH), `failing` (ENDPOINT_DISABLE_AFTER), `gone` (410). */
  disabledReason: DisabledReason | null;
  disabledAt: Date | null;
  secretEnc: string;
  secretPrevEnc: string | null;
  secretPrevUntil: Date | null;
  failingSince: Date | null;
  failingEvents: number;
  createdAt: Date;
  updatedAt: Date;
}

export type DisabledReason = 'request' | 'failing' | 'gone';

/**
 * The id of the tenant's first endpoint, its `eventsTargetUrl` (docs/endpoints.md): the nil UUID, whatever the tenant,
 * so it is stable and never one an added endpoint can have.
 */
export const FIRST_ENDPOINT_ID = '00000000-0000-0000-0000-000000000000';

/**
 * Whether an event type is one of `types`: an exact name, or a prefix `name.*` (any type starting with `name.`);
 * `*` alone takes every type. null: every type.
 */
export function typeMatches(types: readonly string[] | null, type: string): boolean {
  if (types === null) return true;
  for (const t of types) {
    if (t === type || t === '*') return true;
    if (t.endsWith('.*') && type.startsWith(t.slice(0, -1))) return true;
  }
  return false;
}

/** The columns toEndpoint reads. */
export const ENDPOINT_COLUMNS = `id, tenant_id, url, description, event_types, filter, rate_limit_per_second, max_in_flight, disabled, disabled_reason,
  disabled_at, secret_enc, secret_prev_enc, secret_prev_until, failing_since, failing_events, created_at, updated_at`;

export function toEndpoint(r: Record<string, unknown>): EndpointRow {
  return {
    id: r.id as string,
    tenantId: r.tenant_id as string,
    url: r.url as string,
    description: (r.description as string | null) ?? null,
    eventTypes: (r.event_types as string[] | null) ?? null,
    filter: r.filter ?? null,
    rateLimitPerSecond: r.rate_limit_per_second === null ? null : Number(r.rate_limit_per_second),
    maxInFlight: Number(r.max_in_flight),
    disabled: r.disabled as boolean,
    disabledReason: (r.disabled_reason as DisabledReason | null) ?? null,
    disabledAt: (r.disabled_at as Date | null) ?? null,
    secretEnc: r.secret_enc as string,
    secretPrevEnc: (r.secret_prev_enc as string | null) ?? null,
    secretPrevUntil: (r.secret_prev_until as Date | null) ?? null,
    failingSince: (r.failing_since as Date | null) ?? null,
    failingEvents: Number(r.failing_events),
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}
