import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsISO8601, IsOptional, IsString, MaxLength } from 'class-validator';
import { PageLimit } from '../../common/page-limit.js';
import type { DeliveryAttempt } from '../event-delivery.repository.js';
import type { DeliveryState, EventSource, StoredEvent } from '../events.repository.js';
import { DEFAULT_EVENTS_PAGE, MAX_EVENTS_PAGE, type RedeliverState } from '../events.service.js';

export class ListEventsQueryDto {
  @ApiPropertyOptional({ description: 'The `next` cursor of an earlier page; from the start when omitted.' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  after?: string;

  // The default is stated in words: a schema `default` makes generated clients require the field.
  @PageLimit(MAX_EVENTS_PAGE, { description: `Page size; ${DEFAULT_EVENTS_PAGE} when omitted.` })
  limit?: number;
}

export class EventDeliveryDto {
  @ApiProperty({
    enum: ['pending', 'delivered', 'dead', 'no_target', 'filtered'],
    description:
      "`no_target`: the tenant had no eventsTargetUrl (or it was disabled by a 410 Gone); `filtered`: its type is not in the tenant's eventTypes.",
  })
  state: DeliveryState;

  @ApiProperty()
  attempts: number;

  @ApiProperty({ type: String, nullable: true, description: 'Why the last attempt failed: `timeout`, `network` or `http_<status>`.' })
  lastError: string | null;

  @ApiProperty({ type: String, nullable: true, format: 'date-time' })
  deliveredAt: string | null;
}

export class EventDto {
  @ApiProperty({ description: 'Stable; sent as webhook-id on every delivery attempt.' })
  id: string;

  @ApiProperty({ format: 'date-time' })
  receivedAt: string;

  @ApiProperty({ example: 'workflow_step_updated' })
  type: string;

  @ApiProperty({
    description: 'The upstream delivery as received (any JSON value; its fields are not shown by the spec), or the service event.',
    oneOf: [
      { type: 'object', additionalProperties: true },
      { type: 'array', items: {} },
      { type: 'string' },
      { type: 'number' },
      { type: 'boolean' },
    ],
    nullable: true,
  })
  payload: unknown;

  @ApiProperty({ enum: ['upstream', 'service'] })
  source: EventSource;

  @ApiProperty({
    type: String,
    nullable: true,
    description:
      "An upstream delivery: SHA-256 of its body as received (after content decoding), base64url; the same delivery posted again has the same digest (the upstream shows no delivery id), so de-duplicate on it. Sent as `cws-payload-digest` with every attempt. null for the service's own events.",
  })
  payloadDigest: string | null;

  @ApiProperty({ type: EventDeliveryDto })
  delivery: EventDeliveryDto;

  static from(e: StoredEvent): EventDto {
    return {
      id: e.id,
      receivedAt: e.receivedAt.toISOString(),
      type: e.type,
      payload: e.payload,
      source: e.source,
      payloadDigest: e.payloadDigest,
      delivery: {
        state: e.deliveryState,
        attempts: e.deliveryAttempts,
        lastError: e.lastDeliveryError,
        deliveredAt: e.deliveredAt ? e.deliveredAt.toISOString() : null,
      },
    };
  }
}

export class EventPageDto {
  @ApiProperty({ type: [EventDto] })
  events: EventDto[];

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Pass as `after` for the next page (opaque). Null only when there has never been an event.',
  })
  next: string | null;
}

export class AttemptDto {
  @ApiProperty({ format: 'date-time', description: 'When the attempt ended.' })
  at: string;

  @ApiProperty({ type: Number, nullable: true, description: "The target's HTTP status; null when none came." })
  status: number | null;

  @ApiProperty()
  durationMs: number;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'null on success; else `timeout`, `network` or `http_<status>`.',
    example: 'http_503',
  })
  error: string | null;

  static from(a: DeliveryAttempt): AttemptDto {
    return { at: a.at.toISOString(), status: a.status, durationMs: a.durationMs, error: a.error };
  }
}

export class AttemptsDto {
  @ApiProperty({ type: [AttemptDto], description: 'Oldest first. Never a body, a header or a URL.' })
  attempts: AttemptDto[];
}

export class RedeliveredDto {
  @ApiProperty({ description: 'The event, delivered again under this id (webhook-id).' })
  id: string;
}

export class RedeliverSinceDto {
  @ApiProperty({ format: 'date-time', description: 'Events received at or after this time.', example: '2026-11-23T00:00:00Z' })
  @IsISO8601({ strict: true, strictSeparator: true })
  since: string;

  @ApiPropertyOptional({
    enum: ['dead', 'delivered', 'any'],
    default: 'dead',
    description: '`any`: dead, delivered, or stored while there was no target.',
  })
  @IsOptional()
  @IsIn(['dead', 'delivered', 'any'])
  state?: RedeliverState;
}

export class RedeliverQueuedDto {
  @ApiProperty({ description: 'Events queued for delivery again by this call.' })
  queued: number;

  @ApiProperty({
    description: 'Events that matched but were not queued (the per-call or per-tenant bound): call again once these are delivered.',
  })
  remaining: number;
}
