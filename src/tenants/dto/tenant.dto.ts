import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsOptional, IsString, IsUrl, Length, Matches, MaxLength, ValidateIf } from 'class-validator';
import { ENVIRONMENT_NAMES, type EnvironmentName } from '../../config/app-config.js';
import { DESIGNS, TENANT_ID, type Design, type TenantEntity } from '../tenant.entity.js';

const URL_OPTIONS = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

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

  @ApiPropertyOptional({ enum: DESIGNS, default: 'admin+users' })
  @IsOptional()
  @IsIn(DESIGNS)
  design?: Design;

  @ApiProperty({ type: [String], description: 'A connect session\'s returnUrl must start with one of these.', example: ['http://localhost:5173/'] })
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

  @ApiPropertyOptional({ type: String, nullable: true, description: 'null stops event delivery.' })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @IsUrl(URL_OPTIONS)
  @MaxLength(2000)
  eventsTargetUrl?: string | null;
}

export class TenantResponseDto {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ enum: ENVIRONMENT_NAMES }) environment: EnvironmentName;
  @ApiProperty({ enum: DESIGNS }) design: Design;
  @ApiProperty({ type: [String] }) allowedReturnUrls: string[];
  @ApiProperty({ nullable: true, type: String }) eventsTargetUrl: string | null;
  @ApiProperty() createdAt: string;
  @ApiProperty() updatedAt: string;

  static from(t: TenantEntity): TenantResponseDto {
    return {
      id: t.id,
      name: t.name,
      environment: t.environment,
      design: t.design,
      allowedReturnUrls: t.allowedReturnUrls,
      eventsTargetUrl: t.eventsTargetUrl,
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
  @ApiProperty({ description: 'The new secret (whsec_…); the old one stops signing at once.' })
  eventsSecret: string;
}
