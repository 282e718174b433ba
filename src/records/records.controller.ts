import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import {
  ChangePageDto,
  ListChangesQueryDto,
  ListRecordsQueryDto,
  ListSyncQueryDto,
  RecordDto,
  RecordPageDto,
  SyncNowDto,
  SyncPageDto,
  UserQueryDto,
} from './dto/records.dto.js';
import { RecordsService } from './records.service.js';

/** Synced records (API.md 12, docs/records.md): the copy of each user's workflows, its change feed, and sync state. */
@ApiTags('records')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class RecordsController {
  constructor(private readonly records: RecordsService) {}

  @Get('records/workflows')
  @ApiRoute(
    'listRecords',
    "A page of the tenant's synced workflows (one user's with userId)",
    'Read from the copy: no upstream call, no budget spent. `cursor` marks this moment in the change feed: follow `…/records/workflows/changes?cursor=` from it.',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'user_not_connected')
  @ApiOkResponse({ type: RecordPageDto })
  list(@Param('tenantId') tenantId: string, @Query() query: ListRecordsQueryDto): Promise<RecordPageDto> {
    return this.records.list(tenantId, query);
  }

  @Get('records/workflows/changes')
  @ApiRoute(
    'listRecordChanges',
    'Every change committed after a cursor, oldest first',
    'No committed change is ever skipped, however transactions interleave. A cursor older than SYNC_TOMBSTONE_DAYS is `410 cursor_expired`: read the records again.',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'user_not_connected', 'cursor_expired')
  @ApiOkResponse({ type: ChangePageDto })
  changes(@Param('tenantId') tenantId: string, @Query() query: ListChangesQueryDto): Promise<ChangePageDto> {
    return this.records.changes(tenantId, query);
  }

  @Get('records/workflows/:workflowId')
  @ApiRoute('getRecord', "One workflow of a user's synced copy", "`404 record_not_found` when this user's copy does not hold it.")
  @ApiErrors('validation_failed', 'user_id_required', 'unauthorized', 'tenant_not_found', 'user_not_connected', 'record_not_found')
  @ApiOkResponse({ type: RecordDto })
  one(@Param('tenantId') tenantId: string, @Param('workflowId') workflowId: string, @Query() query: UserQueryDto): Promise<RecordDto> {
    return this.records.one(tenantId, query.userId, workflowId);
  }

  @Get('sync')
  @ApiRoute('listSyncStates', "Each synced user's sync state", 'Per user: state, record count, when last listed, when next.')
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'user_not_connected')
  @ApiOkResponse({ type: SyncPageDto })
  syncStates(@Param('tenantId') tenantId: string, @Query() query: ListSyncQueryDto): Promise<SyncPageDto> {
    return this.records.syncStates(tenantId, query);
  }

  @Post('sync')
  @HttpCode(202)
  @ApiRoute('syncNow', 'List now', 'One user (userId), or every synced user of the tenant; the listing runs in the background.')
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'user_not_connected', 'conflict')
  @ApiAcceptedResponse({ description: 'The listing is due now.' })
  async syncNow(@Param('tenantId') tenantId: string, @Body() dto: SyncNowDto): Promise<void> {
    await this.records.syncNow(tenantId, dto.userId);
  }
}
