import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, ValidateIf } from 'class-validator';

/** A tenant's synced-records switches (docs/records.md). */
export class TenantSyncDto {
  @ApiPropertyOptional({
    type: Boolean,
    nullable: true,
    description: "Keep a copy of each connected user's workflows (docs/records.md); null: the default, `SYNC_WORKFLOWS`.",
  })
  @ValidateIf((_, v) => v !== null && v !== undefined)
  @IsBoolean()
  workflows?: boolean | null;
}

export class TenantSyncResponseDto {
  @ApiProperty({ type: Boolean, nullable: true, description: 'Its own switch; null: `SYNC_WORKFLOWS`.' })
  workflows: boolean | null;
}
