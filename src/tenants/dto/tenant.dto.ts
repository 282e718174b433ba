import { applyDecorators } from '@nestjs/common';
import { ApiProperty, type ApiPropertyOptions, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  IsObject,
  ValidateNested,
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  IsUrl,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateIf,
} from 'class-validator';
import { ENVIRONMENT_NAMES, type EnvironmentName } from '../../config/environment-config.js';
import { PageLimit } from '../../common/page-limit.js';
import { TENANT_ID } from '../../common/params.js';
import { DESIGNS, type Design, type TenantEntity } from '../tenant.entity.js';
import { QuotasDto, QuotaUsageDto } from './tenant-quotas.dto.js';
import { TenantSyncDto, TenantSyncResponseDto } from './tenant-sync.dto.js';

const URL_OPTIONS = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

const EVENT_TYPES_DOC: ApiPropertyOptions = {
  type: [String],
  nullable: true,
  description:
    'The event types delivered to eventsTargetUrl (exact names, e.g. `workflow_step_updated`, `connection.reauth_required`, `unknown`); null or omitted: all. Events of other types are still stored and listed (delivery state `filtered`), not delivered.',
  example: ['workflow_step_updated', 'connection.reauth_required'],
};

/** `eventTypes` on create and update: null or omitted means all types. */
const EventTypesField = () =>
  applyDecorators(
    ApiPropertyOptional(EVENT_TYPES_DOC),
    ValidateIf((_, v) => v !== null && v !== undefined),
    IsArray(),
    ArrayMinSize(1),
    ArrayMaxSize(100),
    ArrayUnique(),
    IsString({ each: true }),
    Matches(/^[A-Za-z0-9_.:-]{1,100}$/, {
      each: true,
      message: 'each event type is a name of letters, digits, dots, dashes and underscores',
    }),
  );

const RETENTION_DOC: ApiPropertyOptions = {
  type: Number,
  minimum: 1,
  maximum: 400,
  description:
    'How many days its events and their delivery attempts are kept (then they are not listed, not redeliverable, and removed); omitted: EVENT_RETENTION_DAYS (30 by default).',
};

export class CreateTenantDto {
  @ApiPropertyOptional({ description: 'A slug; generated from the name when omitted.', example: 'acme-legal' })
  @IsOptional()
  @Matches(TENANT_ID, { message: 'id must be a lower-case slug (letters, digits, dashes; at most 63)' })
  id?: string;

  @ApiProperty({ example: 'Acme Legal' })
  @IsString()
  @Length(1, 200)
  name: string;

  @ApiProperty({ enum: ENVIRONMENT_NAMES })
  @IsIn(ENVIRONMENT_NAMES)
  environment: EnvironmentName;

  // The default is stated in words: a schema `default` makes generated clients require the field.
  @ApiPropertyOptional({ enum: DESIGNS, description: '`admin+users` when omitted.' })
  @IsOptional()
  @IsIn(DESIGNS)
  design?: Design;

  @ApiProperty({
    type: [String],
    description: "A connect session's returnUrl must start with one of these.",
    example: ['http://localhost:5173/'],
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(50)
  @IsUrl(URL_OPTIONS, { each: true })
  @MaxLength(2000, { each: true })
  allowedReturnUrls: string[];

  @ApiPropertyOptional({ description: 'Where events are delivered, signed (Standard Webhooks).' })
  @IsOptional()
  @IsUrl(URL_OPTIONS)
  @MaxLength(2000)
  eventsTargetUrl?: string;

  @EventTypesField()
  eventTypes?: string[] | null;

  @ApiPropertyOptional(RETENTION_DOC)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(400)
  eventRetentionDays?: number;
}

export class UpdateTenantDto {
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @Length(1, 200)
  name?: string;

  @ApiPropertyOptional({ enum: DESIGNS })
  @IsOptional()
  @IsIn(DESIGNS)
  design?: Design;

  @ApiPropertyOptional({ type: [String] })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(50)
  @IsUrl(URL_OPTIONS, { each: true })
  @MaxLength(2000, { each: true })
  allowedReturnUrls?: string[];

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'null stops event delivery. Setting it (even to the same URL) delivers again to a target that answered 410 Gone.',
  })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @IsUrl(URL_OPTIONS)
  @MaxLength(2000)
  eventsTargetUrl?: string | null;

  @EventTypesField()
  eventTypes?: string[] | null;

  @ApiPropertyOptional({
    ...RETENTION_DOC,
    nullable: true,
    description: `${RETENTION_DOC.description} null: back to EVENT_RETENTION_DAYS.`,
  })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @IsInt()
  @Min(1)
  @Max(400)
  eventRetentionDays?: number | null;

  @ApiPropertyOptional({
    type: QuotasDto,
    nullable: true,
    description:
      "Its own upstream budgets per class (docs/quotas.md), shared by every instance; a class left out or null follows the environment's (`CWS_<ENV>_QUOTAS`); null: all the environment's.",
  })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @IsObject()
  @ValidateNested()
  @Type(() => QuotasDto)
  quotas?: QuotasDto | null;

  @ApiPropertyOptional({ type: TenantSyncDto, description: 'Synced records (docs/records.md): `{"workflows": true | false | null}`.' })
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => TenantSyncDto)
  sync?: TenantSyncDto;
}

export class RotateEventsSecretDto {
  @ApiPropertyOptional({
    description:
      "For this many seconds (at most 7 days) every delivery carries two signatures, the new secret's and the old one's; 0 or omitted: the old secret stops signing at once.",
    default: 0,
    minimum: 0,
    maximum: 604800,
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(604800)
  overlapSeconds?: number;
}

/** The most tenants one page of GET /v1/tenants answers. */
export const MAX_TENANTS_PAGE = 500;

export class ListTenantsQueryDto {
  @PageLimit(MAX_TENANTS_PAGE, {
    description: `Page size, 1 to ${MAX_TENANTS_PAGE}. Without it, every tenant is answered (one array); with it, at most this many, in the same order.`,
  })
  limit?: number;

  @ApiPropertyOptional({ description: 'The id of the last tenant of the previous page: the page starts after it.' })
  @IsOptional()
  @IsString()
  @Matches(TENANT_ID, { message: 'after must be a tenant id' })
  after?: string;
}

export class TenantResponseDto {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ enum: ENVIRONMENT_NAMES }) environment: EnvironmentName;
  @ApiProperty({ enum: DESIGNS }) design: Design;
  @ApiProperty({ type: [String] }) allowedReturnUrls: string[];
  @ApiProperty({ nullable: true, type: String }) eventsTargetUrl: string | null;
  @ApiProperty({ description: 'The target answered 410 Gone: nothing is delivered until eventsTargetUrl is set again.' })
  eventsTargetDisabled: boolean;
  @ApiProperty(EVENT_TYPES_DOC) eventTypes: string[] | null;
  @ApiProperty({
    minimum: 1,
    maximum: 400,
    description: 'How many days its events and their attempts are kept (its own window, else EVENT_RETENTION_DAYS).',
  })
  eventRetentionDays: number;
  @ApiProperty({ type: QuotasDto, nullable: true, description: "Its own upstream budgets; null: its environment's (docs/quotas.md)." })
  quotas: QuotasDto | null;
  @ApiProperty({ type: TenantSyncResponseDto, description: 'Synced records (docs/records.md).' })
  sync: TenantSyncResponseDto;
  @ApiPropertyOptional({
    type: QuotaUsageDto,
    description:
      'Per class: the budget in force, the pause, the figures of the current and the previous window (one tenant read, not the list).',
  })
  quotaUsage?: QuotaUsageDto;
  @ApiProperty() createdAt: string;
  @ApiProperty() updatedAt: string;

  /** `retentionDays`: the tenant's window in effect (TenantsService.retentionDaysOf). */
  static from(t: TenantEntity, retentionDays: number, quotaUsage?: QuotaUsageDto): TenantResponseDto {
    return {
      id: t.id,
      name: t.name,
      environment: t.environment,
      design: t.design,
      allowedReturnUrls: t.allowedReturnUrls,
      eventsTargetUrl: t.eventsTargetUrl,
      eventsTargetDisabled: t.eventsTargetDisabled,
      eventTypes: t.eventTypes,
      eventRetentionDays: retentionDays,
      quotas: t.quotas,
      sync: { workflows: t.syncWorkflows ?? null },
      ...(quotaUsage ? { quotaUsage } : {}),
      createdAt: t.createdAt.toISOString(),
      updatedAt: t.updatedAt.toISOString(),
    };
  }
}

export class CreatedTenantResponseDto extends TenantResponseDto {
  @ApiProperty({ description: 'The secret that signs events (whsec_…). Shown only here and on rotation.' })
  eventsSecret: string;
}

export class EventsSecretResponseDto {
  @ApiProperty({ description: 'The new secret (whsec_…); the old one stops signing at once, or at the end of the overlap.' })
  eventsSecret: string;
}
