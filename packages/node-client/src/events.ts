import type { IncomingHttpHeaders } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/** The payload of the service's own connection events (`data` of a delivery). */
export interface ConnectionEventData<T extends ConnectionEventType = ConnectionEventType> {
  type: T;
  connectionId: string;
  tenantId: string;
  kind: 'user' | 'admin';
  /** The partner's user id; null for the admin connection. */
  userId: string | null;
  upstreamUserId: string;
  /** Why the connection needs attention (connection.reauth_required). */
  reason?: string;
}

export const CONNECTION_EVENT_TYPES = [
  'connection.created',
  'connection.reauth_required',
  'connection.recovered',
  'connection.deleted',
] as const;
export type ConnectionEventType = (typeof CONNECTION_EVENT_TYPES)[number];

/** `record.changed`: one change of a user's synced workflow; read the record or the feed for its content. */
export interface RecordChangedData {
  object: 'workflow';
  id: string;
  userId: string;
  action: 'added' | 'updated' | 'deleted';
  version: number;
  cursor: string;
}

/** `sync.ready`: a user's first full listing is in the copy (its records are in the feed, not announced one by one). */
export interface SyncReadyData {
  userId: string;
  records: number;
  cursor: string;
}

/** `sync.failing`: a user's listing has failed for an hour. */
export interface SyncFailingData {
  userId: string;
  reason: string;
  since: string;
}

/** `endpoint.failing`, `endpoint.disabled`, `endpoint.recovered`: about another of the tenant's event endpoints. */
export interface EndpointEventData {
  endpointId: string;
  description: string | null;
  reason?: string;
  failingSince?: string;
  failingHours?: number;
}

/** The `data` of each event type cws-connect emits itself. */
export interface ServiceEventData {
  'connection.created': ConnectionEventData<'connection.created'>;
  'connection.reauth_required': ConnectionEventData<'connection.reauth_required'>;
  'connection.recovered': ConnectionEventData<'connection.recovered'>;
  'connection.deleted': ConnectionEventData<'connection.deleted'>;
  'record.changed': RecordChangedData;
  'sync.ready': SyncReadyData;
  'sync.failing': SyncFailingData;
  'endpoint.failing': EndpointEventData;
  'endpoint.disabled': EndpointEventData;
  'endpoint.recovered': EndpointEventData;
}

export const SERVICE_EVENT_TYPES = [
  ...CONNECTION_EVENT_TYPES,
  'record.changed',
  'sync.ready',
  'sync.failing',
  'endpoint.failing',
  'endpoint.disabled',
  'endpoint.recovered',
] as const satisfies ReadonlyArray<keyof ServiceEventData>;
export type ServiceEventType = (typeof SERVICE_EVENT_TYPES)[number];

/** An event cws-connect emits itself; `type` tells which, and narrows `data`. */
export type ServiceEvent = {
  [T in ServiceEventType]: { source: 'service'; id: string; type: T; timestamp: string; data: ServiceEventData[T] };
}[ServiceEventType];

/** An upstream delivery, forwarded as received: its shape is the upstream's (`type` from its event field, or `unknown`). */
export interface UpstreamEvent {
  source: 'upstream';
  id: string;
  type: string;
  timestamp: string;
  data: unknown;
}

export type VerifiedEvent = ServiceEvent | UpstreamEvent;

export class EventVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EventVerificationError';
  }
}

/**
 * Checks a delivery's Standard Webhooks signature (`webhook-id`, `webhook-timestamp` within 5 minutes,
 * `webhook-signature`) with the tenant's events secret (eventsTargetUrl) or the endpoint's own secret (an added
 * endpoint), over the raw body exactly as received, and returns the event; `id` is the `webhook-id` (the event's id
 * at eventsTargetUrl, `msg_…` at an added endpoint). During a secret rotation's overlap a delivery carries two
 * signatures: either secret verifies it. Throws EventVerificationError when the signature, the timestamp or the body is not right: answer such a
 * request with a 4xx and do nothing with it.
 */
export function verifyEvent(
  headers: IncomingHttpHeaders | Headers | Record<string, string | string[] | undefined>,
  rawBody: string | Buffer,
  secret: string,
): VerifiedEvent {
  const flat = flatHeaders(headers);
  let body: unknown;
  try {
    body = new Webhook(secret).verify(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'), flat);
  } catch (e) {
    throw new EventVerificationError(e instanceof WebhookVerificationError ? e.message : 'The events secret is not a whsec_ secret.');
  }
  if (!isDelivery(body)) throw new EventVerificationError('The body is not a cws-connect event ({type, timestamp, data}).');
  const id = flat['webhook-id'];
  if ((SERVICE_EVENT_TYPES as readonly string[]).includes(body.type)) {
    return { source: 'service', id, type: body.type, timestamp: body.timestamp, data: body.data } as ServiceEvent;
  }
  return { source: 'upstream', id, type: body.type, timestamp: body.timestamp, data: body.data };
}

function isDelivery(v: unknown): v is { type: string; timestamp: string; data: unknown } {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { type?: unknown }).type === 'string' &&
    typeof (v as { timestamp?: unknown }).timestamp === 'string' &&
    'data' in v
  );
}

function flatHeaders(headers: IncomingHttpHeaders | Headers | Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  const entries: Iterable<[string, string | string[] | undefined]> =
    headers instanceof Headers ? headers.entries() : Object.entries(headers);
  for (const [k, v] of entries) if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}
