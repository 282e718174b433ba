import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsObject, IsOptional, IsString, Length, MaxLength } from 'class-validator';
import { RECEIVER_AUTHS, type ReceiverAuth } from '../webhooks.service.js';

export class CreateWebhookDto {
  @ApiProperty({
    type: [String],
    example: ['workflow_step_updated', 'workflow_attribute_updated'],
    description: 'Event kinds subscribed to (spec 6).',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Length(1, 200, { each: true })
  events: string[];

  @ApiPropertyOptional({
    description:
      'Where the upstream delivers. Omitted: this service itself (`{PUBLIC_URL}/inbound/{tenantId}/{receiverId}`) with a generated secret. https only (http://localhost and http://127.0.0.1 outside production).',
  })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  targetURL?: string;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'string' },
    description: 'Header name to string value, sent with every delivery.',
  })
  @IsOptional()
  @IsObject()
  headers?: Record<string, unknown>;

  // The default is stated in words: a schema `default` makes generated clients require the field.
  @ApiPropertyOptional({
    enum: RECEIVER_AUTHS,
    description: 'Self-targeted mode only: how the generated secret is sent (spec 5.2); `bearer` when omitted.',
  })
  @IsOptional()
  @IsIn(RECEIVER_AUTHS)
  auth?: ReceiverAuth;
}
