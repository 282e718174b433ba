import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { AppError } from '../common/app-error.js';
import { ConnectService } from './connect.service.js';
import { ConnectionsService } from './connections.service.js';
import { ConnectSessionResponseDto, CreateConnectSessionDto } from './dto/connect-session.dto.js';
import { ConnectionResponseDto } from './dto/connection.dto.js';

export const connectionIdPipe = new ParseUUIDPipe({ exceptionFactory: () => new AppError('connection_not_found', 'No such connection.') });

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class ConnectionsController {
  constructor(
    private readonly connect: ConnectService,
    private readonly connections: ConnectionsService,
  ) {}

  @Post('connect-sessions')
  @ApiRoute('createConnectSession', 'Start connecting a user or the admin', 'Send the browser to `connectUrl` (single use, 10 minutes).')
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'environment_not_configured')
  @ApiCreatedResponse({ type: ConnectSessionResponseDto })
  async createSession(@Param('tenantId') tenantId: string, @Body() dto: CreateConnectSessionDto): Promise<ConnectSessionResponseDto> {
    const { connectUrl, expiresAt } = await this.connect.createSession(tenantId, dto);
    return { connectUrl, expiresAt: expiresAt.toISOString() };
  }

  @Get('connections')
  @ApiRoute('listConnections', "List a tenant's connections (never their tokens)")
  @ApiErrors('unauthorized', 'tenant_not_found')
  @ApiOkResponse({ type: [ConnectionResponseDto] })
  async list(@Param('tenantId') tenantId: string): Promise<ConnectionResponseDto[]> {
    return (await this.connections.list(tenantId)).map(ConnectionResponseDto.from);
  }

  @Get('connections/:connectionId')
  @ApiRoute('getConnection', 'Get a connection')
  @ApiErrors('unauthorized', 'tenant_not_found', 'connection_not_found')
  @ApiOkResponse({ type: ConnectionResponseDto })
  async get(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<ConnectionResponseDto> {
    return ConnectionResponseDto.from(await this.connections.get(tenantId, id));
  }

  @Delete('connections/:connectionId')
  @HttpCode(204)
  @ApiRoute('deleteConnection', 'Delete a connection and its tokens')
  @ApiErrors('unauthorized', 'tenant_not_found', 'connection_not_found')
  @ApiNoContentResponse({ description: 'The connection and its tokens are destroyed.' })
  async delete(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<void> {
    await this.connections.delete(tenantId, id);
  }
}
