import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Length } from 'class-validator';
import type { TenantApiKeyEntity } from '../../auth/tenant-api-key.entity.js';

export class CreateApiKeyDto {
  @ApiPropertyOptional({ example: 'production backend' })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  name?: string;
}

export class ApiKeyResponseDto {
  @ApiProperty() id: string;
  @ApiProperty({ nullable: true, type: String }) name: string | null;
  @ApiProperty({ description: 'The first characters of the key, to recognise it.' }) prefix: string;
  @ApiProperty() createdAt: string;

  static from(k: TenantApiKeyEntity): ApiKeyResponseDto {
    return { id: k.id, name: k.name, prefix: k.keyPrefix, createdAt: k.createdAt.toISOString() };
  }
}

export class CreatedApiKeyResponseDto extends ApiKeyResponseDto {
  @ApiProperty({ description: 'The key (cwsk_…). Shown only here: only its SHA-256 is stored.' })
  key: string;
}
