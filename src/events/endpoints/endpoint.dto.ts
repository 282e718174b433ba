import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsISO8601,
  IsObject,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateIf,
} from 'class-validator';

const URL_OPTIONS = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };
/** An event type (`workflow_step_updated`, `connection.created`) or a prefix (`record.*`), or `*`. */
const EVENT_TYPE = /^(\*|[A-Za-z0-9_.:-]{1,120}(\.\*)?)$/;

const FILTER_DOC = {
  type: 'object',
  additionalProperties: true,
  nullable: true,
  description:
    'JSON over the delivered body `{"type", "timestamp", "data"}` (dotted paths, as `data.transition`) with `$eq $neq $gt $gte $lt $lte $in $nin $exists $and $or`, as MongoDB reads them; a bad one is `validation_failed` naming its path. null: every event of its types.',
  example: { type: 'workflow_step_updated', 'data.transition': { $in: ['approved', 'rejected'] } },
} as const;

export class CreateEndpointDto {
  @ApiProperty({
    description: "Where the endpoint's events are POSTed: eventsTargetUrl's rules (https; http only to localhost outside production).",
  })
  @IsUrl(URL_OPTIONS)
  @MaxLength(2000)
  url: string;

  @ApiPropertyOptional({ type: String, nullable: true, maxLength: 500 })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsString()
  @MaxLength(500)
  description?: string | null;

  @ApiPropertyOptional({
    type: [String],
    nullable: true,
    description: 'Exact event types, or prefixes such as `record.*`; null or omitted: every type.',
    example: ['workflow_step_updated', 'connection.*'],
  })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Matches(EVENT_TYPE, { each: true, message: 'each of eventTypes is an event type or a prefix ending in .*' })
  eventTypes?: string[] | null;

  @ApiPropertyOptional(FILTER_DOC)
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsObject()
  filter?: Record<string, unknown> | null;

  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    minimum: 1,
    maximum: 1000,
    description: 'Most attempts started in any one second over all instances; null or omitted: no limit.',
  })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsInt()
  @Min(1)
  @Max(1000)
  rateLimitPerSecond?: number | null;

  @ApiPropertyOptional({ minimum: 1, maximum: 64, description: 'Most attempts running at once over all instances; 4 when omitted.' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(64)
  maxInFlight?: number;

  @ApiPropertyOptional({ description: 'A disabled endpoint is sent nothing; what matches meanwhile is kept as `missed`.' })
  @IsOptional()
  @IsBoolean()
  disabled?: boolean;
}

export class UpdateEndpointDto {
  @ApiPropertyOptional({ description: 'A new URL (same rules as at creation).' })
  @IsOptional()
  @IsUrl(URL_OPTIONS)
  @MaxLength(2000)
  url?: string;

  @ApiPropertyOptional({ type: String, nullable: true, maxLength: 500 })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsString()
  @MaxLength(500)
  description?: string | null;

  @ApiPropertyOptional({ type: [String], nullable: true, description: 'As at creation; null: every type.' })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Matches(EVENT_TYPE, { each: true, message: 'each of eventTypes is an event type or a prefix ending in .*' })
  eventTypes?: string[] | null;

  @ApiPropertyOptional(FILTER_DOC)
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsObject()
  filter?: Record<string, unknown> | null;

  @ApiPropertyOptional({ type: Number, nullable: true, minimum: 1, maximum: 1000 })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsInt()
  @Min(1)
  @Max(1000)
  rateLimitPerSecond?: number | null;

  @ApiPropertyOptional({ minimum: 1, maximum: 64 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(64)
  maxInFlight?: number;

  @ApiPropertyOptional({ description: '`false` enables a disabled endpoint again (and resets its failure clock); `true` disables it.' })
  @IsOptional()
  @IsBoolean()
  disabled?: boolean;
}

export class RotateEndpointSecretDto {
  @ApiPropertyOptional({
    minimum: 0,
    maximum: 604800,
    description:
      'For this many seconds every delivery carries both signatures (old and new); 86400 when omitted; 0: the old one stops at once.',
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(604800)
  overlapSeconds?: number;
}

export class EndpointSecretDto {
  @ApiProperty({ description: 'The new signing secret (`whsec_…`): shown only here.' })
  secret: string;
}

export class RedeliverEndpointDto {
  @ApiProperty({ format: 'date-time', description: 'Events received at or after this time.', example: '2026-11-23T00:00:00Z' })
  @IsISO8601({ strict: true, strictSeparator: true })
  since: string;

  @ApiPropertyOptional({
    enum: ['failed', 'missed', 'any'],
    description: '`failed` (the default): given up on; `missed`: matched while the endpoint was disabled; `any`: those and the delivered.',
  })
  @IsOptional()
  @IsIn(['failed', 'missed', 'any'])
  state?: 'failed' | 'missed' | 'any';
}

export class EndpointQueuedDto {
  @ApiProperty({ description: 'Deliveries queued again by this call (the same webhook-id as before).' })
  queued: number;
}

export class TestFilterDto {
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'An event as delivered: `{"type", "timestamp", "data"}`.',
    example: { type: 'workflow_step_updated', timestamp: '2026-11-23T00:00:00Z', data: { transition: 'approved' } },
  })
  @IsObject()
  event: Record<string, unknown>;
}

export class FilterMatchDto {
  @ApiProperty({ description: "Whether the endpoint's types and filter take this event." })
  matches: boolean;
}

export class EndpointHealthDto {
  @ApiProperty({ enum: ['healthy', 'failing', 'disabled'] })
  state: 'healthy' | 'failing' | 'disabled';

  @ApiPropertyOptional({ format: 'date-time', description: 'Since when every attempt has failed (state `failing`, or disabled for it).' })
  failingSince?: string;

  @ApiPropertyOptional({
    enum: ['request', 'failing', 'gone'],
    description: '`request`: by PATCH; `failing`: after ENDPOINT_DISABLE_AFTER; `gone`: it answered 410.',
  })
  disabledReason?: 'request' | 'failing' | 'gone';

  @ApiProperty({ type: Number, nullable: true, description: 'Share of the attempts of the last 24 h that succeeded (0–1); null: none.' })
  successRate24h: number | null;

  @ApiProperty({ type: Number, nullable: true, description: "99th percentile of the last 24 h's attempt durations, ms; null: none." })
  p99Ms24h: number | null;

  @ApiProperty({ description: 'Deliveries waiting (not delivered, failed or missed yet).' })
  pending: number;

  @ApiProperty({ description: 'Age of the oldest waiting delivery, seconds; 0: none waits.' })
  oldestPendingSeconds: number;
}

export class EndpointDto {
  @ApiProperty({
    description: "The endpoint's id; the tenant's first endpoint (its eventsTargetUrl) is always `00000000-0000-0000-0000-000000000000`.",
  })
  id: string;

  @ApiProperty()
  url: string;

  @ApiProperty({ type: String, nullable: true })
  description: string | null;

  @ApiProperty({ type: [String], nullable: true })
  eventTypes: string[] | null;

  @ApiProperty(FILTER_DOC)
  filter: Record<string, unknown> | null;

  @ApiProperty({ type: Number, nullable: true })
  rateLimitPerSecond: number | null;

  @ApiProperty({ type: Number, nullable: true, description: 'null for the first endpoint (eventsTargetUrl), delivered as before.' })
  maxInFlight: number | null;

  @ApiProperty()
  disabled: boolean;

  @ApiProperty({ format: 'date-time' })
  createdAt: string;

  @ApiProperty({ type: EndpointHealthDto })
  health: EndpointHealthDto;
}

export class CreatedEndpointDto extends EndpointDto {
  @ApiProperty({ description: 'The signing secret (`whsec_…`): shown only here.' })
  secret: string;
}

export class EndpointListDto {
  @ApiProperty({ type: [EndpointDto] })
  endpoints: EndpointDto[];
}
