import { Controller, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { connectionIdPipe } from '../common/params.js';
import { ConnectionResponseDto } from '../connections/dto/connection.dto.js';
import { RenewalService } from './renewal.service.js';

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId')
export class RefreshController {
  constructor(private readonly renewal: RenewalService) {}

  @Post('connections/:connectionId/refresh')
  @HttpCode(200)
  @ApiOkResponse({ type: ConnectionResponseDto, description: 'The connection after a renewal of its tokens.' })
  @ApiRoute(
    'refreshConnection',
    "Renew a connection's tokens now",
    '`409 reauth_required`: the upstream refused the refresh token; the user must connect again.',
  )
  @ApiErrors(
    'unauthorized',
    'tenant_not_found',
    'connection_not_found',
    'reauth_required',
    'environment_not_configured',
    'upstream_unavailable',
    'service_unavailable',
    'upstream_timeout',
  )
  async refresh(@Param('tenantId') tenantId: string, @Param('connectionId', connectionIdPipe) id: string): Promise<ConnectionResponseDto> {
    return ConnectionResponseDto.from(await this.renewal.forceRenew(tenantId, id));
  }
}
