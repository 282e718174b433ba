import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../common/api-errors.docs.js';
import { AppError } from '../common/app-error.js';
import { ConnectService } from './connect.service.js';
import { ConnectionsService } from './connections.service.js';
import { ConnectSessionResponseDto, CreateConnectSessionDto } from './dto/connect-session.dto.js';
import { ConnectionPageDto, ConnectionResponseDto, ListConnectionsQueryDto, RenewalDto, RenewalHistoryDto } from './dto/connection.dto.js';

export const connectionIdPipe = new ParseUUIDPipe({ exceptionFactory: () => new AppError('connection_not_found', 'No such connection.') });

const UNKNOWN_CONNECTION = { 401: '`unauthorized`', 404: '`tenant_not_found`, `connection_not_found`' };

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class ConnectionsController {
  constructor(
    private readonly connect: ConnectService,
    private readonly connections: ConnectionsService,
  ) {}

  @Post('connect-sessions')
  @ApiCreatedResponse({ type: ConnectSessionResponseDto })
  async createSession(@Param('tenantId') tenantId: string, @Body() dto: CreateConnectSessionDto): Promise<ConnectSessionResponseDto> {
    const { connectUrl, expiresAt } = await this.connect.createSession(tenantId, dto);
    return { connectUrl, expiresAt: expiresAt.toISOString() };
  }

  @Get('connections')
  @ApiOperation({ summary: "A page of the tenant's connections", description: 'In creation order (stable); filters combine. Pass `next` back as `after` until it is null.' })
  @ApiOkResponse({ type: ConnectionPageDto })
  @ApiErrors({ 400: '`validation_failed` (a bad limit or filter, or an `after` this service did not give out)', 401: '`unauthorized`', 404: '`tenant_not_found`' })
  async list(@Param('tenantId') tenantId: string, @Query() query: ListConnectionsQueryDto): Promise<ConnectionPageDto> {
    const page = await this.connections.list(tenantId, query);
    return { connections: page.connections.map((c) => ConnectionResponseDto.from(c.connection, c.lastError)), next: page.next };
  }

  @Get('connections/:connectionId')
  @ApiOperation({ summary: 'One connection, with its last renewal error' })
  @ApiOkResponse({ type: ConnectionResponseDto })
  @ApiErrors(UNKNOWN_CONNECTION)
  async get(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<ConnectionResponseDto> {
    const found = await this.connections.get(tenantId, id);
    return ConnectionResponseDto.from(found.connection, found.lastError);
  }

  @Get('connections/:connectionId/renewals')
  @ApiOperation({ summary: "The connection's last 20 renewals", description: 'Each renewal that ran (scheduled, on demand or forced): when it ended, its outcome, its error code and how long it took; newest first.' })
  @ApiOkResponse({ type: RenewalHistoryDto })
  @ApiErrors(UNKNOWN_CONNECTION)
  async renewals(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<RenewalHistoryDto> {
    return { renewals: (await this.connections.renewals(tenantId, id)).map(RenewalDto.from) };
  }

  @Delete('connections/:connectionId')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a connection and its tokens' })
  @ApiNoContentResponse({ description: 'The connection and its tokens are destroyed.' })
  @ApiErrors(UNKNOWN_CONNECTION)
  async delete(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<void> {
    await this.connections.delete(tenantId, id);
  }
}
