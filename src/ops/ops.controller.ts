import { Controller, Get, Header, HttpCode, Req, Res } from '@nestjs/common';
import { ApiExcludeEndpoint, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../common/api-docs.js';
import type { Request, Response } from 'express';
import { Public } from '../auth/auth.decorators.js';
import { buildInfo } from '../telemetry/build-info.js';
import { HealthService } from './health.service.js';
import { LivenessDto } from './liveness.dto.js';
import { MetricsAccess } from './metrics-access.js';
import { MetricsService } from '../telemetry/metrics.service.js';

@ApiTags('operations')
@Public()
@Controller()
export class OpsController {
  constructor(
    private readonly health: HealthService,
    private readonly metrics: MetricsService,
    private readonly access: MetricsAccess,
  ) {}

  @Get('health/live')
  @ApiOperation({ operationId: 'getLiveness', summary: 'Is the process up?', security: [] })
  @ApiOkResponse({
    description: 'The process is up, with the version and the git commit it runs (`unknown` when the build could not tell).',
    type: LivenessDto,
  })
  live(): LivenessDto {
    return { status: 'ok', ...buildInfo() };
  }

  @Get('health/ready')
  @ApiOperation({ operationId: 'getReadiness', summary: 'Can this instance serve requests?', security: [] })
  @ApiErrors('service_unavailable')
  @ApiOkResponse({ description: 'The database is reachable and every migration is applied; 503 otherwise.' })
  ready() {
    return this.health.ready();
  }

  @Get('metrics')
  @HttpCode(200)
  @Header('cache-control', 'no-store')
  @ApiExcludeEndpoint()
  async prometheus(@Req() req: Request, @Res() res: Response): Promise<void> {
    this.access.checkMainPort(req);
    res.setHeader('content-type', this.metrics.registry.contentType);
    res.send(await this.metrics.registry.metrics());
  }
}
