import { Controller, Delete, Get, HttpCode, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { AuditBy, type AuditContext } from '../audit/audit-context.js';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { connectionIdPipe } from '../common/params.js';
import { ConnectionsService } from './connections.service.js';
import { ConnectionPageDto, ConnectionResponseDto, ListConnectionsQueryDto, RenewalDto, RenewalHistoryDto } from './dto/connection.dto.js';

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class ConnectionsController {
  constructor(private readonly connections: ConnectionsService) {}

  @Get('connections')
  @ApiRoute(
    'listConnections',
    "A page of the tenant's connections (never their tokens)",
    'In creation order (stable); filters combine. Pass `next` back as `after` until it is null; an `after` this service did not give out is `validation_failed`.',
  )
  @ApiOkResponse({ type: ConnectionPageDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  async list(@Param('tenantId') tenantId: string, @Query() query: ListConnectionsQueryDto): Promise<ConnectionPageDto> {
    const page = await this.connections.list(tenantId, query);
    return { connections: page.connections.map((c) => ConnectionResponseDto.from(c.connection, c.lastError)), next: page.next };
  }

  @Get('connections/:connectionId')
  @ApiRoute('getConnection', 'One connection, with its last renewal error')
  @ApiOkResponse({ type: ConnectionResponseDto })
  @ApiErrors('unauthorized', 'tenant_not_found', 'connection_not_found')
  async get(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<ConnectionResponseDto> {
    const found = await this.connections.get(tenantId, id);
    return ConnectionResponseDto.from(found.connection, found.lastError);
  }

  @Get('connections/:connectionId/renewals')
  @ApiRoute(
    'listConnectionRenewals',
    "The connection's last 20 renewals",
    'Each renewal that ran (scheduled, on demand or forced): when it ended, its outcome, its error code and how long it took; newest first.',
  )
  @ApiOkResponse({ type: RenewalHistoryDto })
  @ApiErrors('unauthorized', 'tenant_not_found', 'connection_not_found')
  async renewals(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<RenewalHistoryDto> {
    return { renewals: (await this.connections.renewals(tenantId, id)).map(RenewalDto.from) };
  }

  @Delete('connections/:connectionId')
  @HttpCode(204)
  @ApiRoute('deleteConnection', 'Delete a connection and its tokens')
  @ApiNoContentResponse({ description: 'The connection and its tokens are destroyed.' })
  @ApiErrors('unauthorized', 'tenant_not_found', 'connection_not_found')
  async delete(
    @Param('tenantId') tenantId: string,
    @Param('connectionId', connectionIdPipe) id: string,
    @AuditBy() by: AuditContext,
  ): Promise<void> {
    await this.connections.delete(tenantId, id, by);
  }
}
