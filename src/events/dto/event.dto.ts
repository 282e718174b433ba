import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import type { DeliveryState, EventSource, StoredEvent } from '../events.repository.js';

export class ListEventsQueryDto {
  @ApiPropertyOptional({ description: 'The `next` cursor of an earlier page; from the start when omitted.' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  after?: string;

  // The default is stated in words: a schema `default` makes generated clients require the field.
  @ApiPropertyOptional({ description: 'Page size; 50 when omitted.', type: 'integer', minimum: 1, maximum: 500 })
  @IsOptional()
  @Matches(/^\d{1,4}$/, { message: 'limit must be an integer between 1 and 500' })
  limit?: string;
}

export class EventDeliveryDto {
  @ApiProperty({ enum: ['pending', 'delivered', 'dead', 'no_target'] })
  state: DeliveryState;

  @ApiProperty()
  attempts: number;

  @ApiProperty({ type: String, nullable: true, description: 'Why the last attempt failed (status or error kind).' })
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

  @ApiProperty({ description: 'The upstream delivery as received, or the service event.' })
  payload: unknown;

  @ApiProperty({ enum: ['upstream', 'service'] })
  source: EventSource;

  @ApiProperty({ type: EventDeliveryDto })
  delivery: EventDeliveryDto;

  static from(e: StoredEvent): EventDto {
    return {
      id: e.id,
      receivedAt: e.receivedAt.toISOString(),
      type: e.type,
      payload: e.payload,
      source: e.source,
      delivery: { state: e.deliveryState, attempts: e.deliveryAttempts, lastError: e.lastDeliveryError, deliveredAt: e.deliveredAt ? e.deliveredAt.toISOString() : null },
    };
  }
}

export class EventPageDto {
  @ApiProperty({ type: [EventDto] })
  events: EventDto[];

  @ApiProperty({ type: String, nullable: true, description: 'Pass as `after` for the next page (opaque). Null only when there has never been an event.' })
  next: string | null;
}
