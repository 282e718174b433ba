import { Body, Controller, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { ConnectService } from './connect.service.js';
import { ConnectSessionResponseDto, CreateConnectSessionDto } from './dto/connect-session.dto.js';

/** Where a connect starts: the partner asks for a connect link (API.md section 5). */
@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class ConnectSessionsController {
  constructor(private readonly connect: ConnectService) {}

  @Post('connect-sessions')
  @ApiRoute('createConnectSession', 'Start connecting a user or the admin', 'Send the browser to `connectUrl` (single use, 10 minutes).')
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'environment_not_configured')
  @ApiCreatedResponse({ type: ConnectSessionResponseDto })
  async createSession(@Param('tenantId') tenantId: string, @Body() dto: CreateConnectSessionDto): Promise<ConnectSessionResponseDto> {
    const { connectUrl, expiresAt } = await this.connect.createSession(tenantId, dto);
    return { connectUrl, expiresAt: expiresAt.toISOString() };
  }
}
