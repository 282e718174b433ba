import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Length, MaxLength } from 'class-validator';
import { PageLimit } from '../../common/page-limit.js';

export const DEFAULT_RECORDS_PAGE = 100;
export const MAX_RECORDS_PAGE = 1000;

export class UserQueryDto {
  @ApiPropertyOptional({ description: "The partner's id of the user whose copy is read." })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  userId?: string;
}

export class ListRecordsQueryDto extends UserQueryDto {
  @PageLimit(MAX_RECORDS_PAGE, { default: DEFAULT_RECORDS_PAGE })
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` of the previous page (opaque).' })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  after?: string;
}

export class ListChangesQueryDto extends UserQueryDto {
  @PageLimit(MAX_RECORDS_PAGE, { default: DEFAULT_RECORDS_PAGE })
  limit?: number;

  @ApiPropertyOptional({
    description:
      'Where to read from: the `cursor` of a records page, of a change, of an event, or the `next` of the previous page (opaque). Omitted: the oldest change kept.',
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  cursor?: string;
}

export class ListSyncQueryDto extends UserQueryDto {
  @PageLimit(MAX_RECORDS_PAGE, { default: DEFAULT_RECORDS_PAGE })
  limit?: number;

  @ApiPropertyOptional({ description: 'The `next` of the previous page (opaque).' })
  @IsOptional()
  @IsString()
  @MaxLength(400)
  after?: string;
}

export class SyncNowDto {
  @ApiPropertyOptional({ description: 'List this user now; omitted: every synced user of the tenant.' })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  userId?: string;
}

export class RecordDto {
  @ApiProperty({ description: "The upstream's workflow id." }) id: string;
  @ApiProperty() userId: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: "The upstream's object, as the user's token listed it." })
  data: unknown;
  @ApiProperty({ type: Number, nullable: true, description: "The upstream's `versionNumber`." }) version: number | null;
  @ApiProperty({ type: String, nullable: true, description: "The upstream's `lastModified`." }) lastModified: string | null;
  @ApiProperty({ description: 'When this copy was last written.' }) syncedAt: string;
}

export class RecordPageDto {
  @ApiProperty({ type: [RecordDto] }) items: RecordDto[];
  @ApiProperty({ type: String, nullable: true, description: 'Pass back as `after`; null on the last page.' }) next: string | null;
  @ApiProperty({ description: 'This moment in the change feed: read `…/changes?cursor=` from it to follow what changes next.' })
  cursor: string;
}

export class ChangeDto {
  @ApiProperty({ description: "The upstream's workflow id." }) id: string;
  @ApiProperty() userId: string;
  @ApiProperty({ enum: ['added', 'updated', 'deleted'] }) action: 'added' | 'updated' | 'deleted';
  @ApiProperty({ type: Number, nullable: true }) version: number | null;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'The object as of this change (not for `deleted`).' })
  data?: unknown;
  @ApiProperty({ description: 'The position right after this change.' }) cursor: string;
}

export class ChangePageDto {
  @ApiProperty({ type: [ChangeDto] }) items: ChangeDto[];
  @ApiProperty({ description: 'Pass back as `cursor` to read on; never null (the feed goes on).' }) next: string;
}

export class SyncStateDto {
  @ApiProperty() userId: string;
  @ApiProperty({ description: "The user's connection, whose token lists the copy." }) connectionId: string;
  @ApiProperty({ enum: ['initial', 'ready', 'failing', 'paused'] }) state: 'initial' | 'ready' | 'failing' | 'paused';
  @ApiProperty({ description: "How many records the user's copy holds." }) records: number;
  @ApiProperty({ type: String, nullable: true, description: 'When the copy was last listed whole.' }) lastListedAt: string | null;
  @ApiProperty({ type: String, nullable: true }) lastChangeAt: string | null;
  @ApiProperty() nextListAt: string;
  @ApiProperty({ description: 'How late the next listing is, in seconds: 0 while it is not due (and when the tenant does not sync).' })
  lagSeconds: number;
  @ApiPropertyOptional({ type: String, description: 'Why the last listing did not complete (never a token).' }) lastError?: string;
  @ApiProperty({ type: String, nullable: true, description: 'Since when the listing fails (null: its last one completed).' })
  failingSince: string | null;
}

export class SyncPageDto {
  @ApiProperty({ type: [SyncStateDto] }) items: SyncStateDto[];
  @ApiProperty({ type: String, nullable: true }) next: string | null;
}
