import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiTags,
} from '@nestjs/swagger';
import { Audited } from '../../audit/audited.decorator.js';
import { ShowsSecret } from '../../auth/auth.decorators.js';
import { ApiErrors, ApiRoute } from '../../common/api-docs.js';
import { uuidParam } from '../../common/params.js';
import {
  CreatedEndpointDto,
  CreateEndpointDto,
  EndpointDto,
  EndpointListDto,
  EndpointQueuedDto,
  EndpointSecretDto,
  FilterMatchDto,
  RedeliverEndpointDto,
  RotateEndpointSecretDto,
  TestFilterDto,
  UpdateEndpointDto,
} from './endpoint.dto.js';
import { EndpointsService } from './endpoints.service.js';

const endpointIdPipe = uuidParam('endpoint_not_found', 'No such event endpoint.');
const byEndpoint = (params: Record<string, string>) => ({ tenantId: params.tenantId ?? null, target: `endpoints/${params.endpointId}` });

@ApiTags('endpoints')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/endpoints')
export class EndpointsController {
  constructor(private readonly endpoints: EndpointsService) {}

  @Post()
  @ShowsSecret()
  @Audited('endpoint.created', (params, result) => ({
    tenantId: params.tenantId ?? null,
    target: result ? `endpoints/${(result as CreatedEndpointDto).id}` : null,
  }))
  @ApiRoute(
    'createEndpoint',
    'Add an event endpoint',
    'Its signing `secret` is in this answer only. At most ENDPOINTS_PER_TENANT endpoints per tenant, eventsTargetUrl included (`endpoint_limit`).',
  )
  @ApiCreatedResponse({ type: CreatedEndpointDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'target_not_allowed', 'endpoint_limit')
  create(@Param('tenantId') tenantId: string, @Body() dto: CreateEndpointDto): Promise<CreatedEndpointDto> {
    return this.endpoints.create(tenantId, dto);
  }

  @Get()
  @ApiRoute(
    'listEndpoints',
    "The tenant's event endpoints",
    'Its eventsTargetUrl first (id `00000000-0000-0000-0000-000000000000`), when set; never a secret.',
  )
  @ApiOkResponse({ type: EndpointListDto })
  @ApiErrors('unauthorized', 'tenant_not_found')
  async list(@Param('tenantId') tenantId: string): Promise<EndpointListDto> {
    return { endpoints: await this.endpoints.list(tenantId) };
  }

  @Get(':endpointId')
  @ApiRoute('getEndpoint', 'One event endpoint, with its health')
  @ApiOkResponse({ type: EndpointDto })
  @ApiErrors('unauthorized', 'tenant_not_found', 'endpoint_not_found')
  get(@Param('tenantId') tenantId: string, @Param('endpointId', endpointIdPipe) endpointId: string): Promise<EndpointDto> {
    return this.endpoints.get(tenantId, endpointId);
  }

  @Patch(':endpointId')
  @Audited('endpoint.updated', byEndpoint)
  @ApiRoute(
    'updateEndpoint',
    'Change an event endpoint',
    '`{"disabled": false}` enables it again and resets its failure clock. The first endpoint (eventsTargetUrl) takes url, eventTypes and disabled only.',
  )
  @ApiOkResponse({ type: EndpointDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'endpoint_not_found', 'target_not_allowed')
  update(
    @Param('tenantId') tenantId: string,
    @Param('endpointId', endpointIdPipe) endpointId: string,
    @Body() dto: UpdateEndpointDto,
  ): Promise<EndpointDto> {
    return this.endpoints.update(tenantId, endpointId, dto);
  }

  @Delete(':endpointId')
  @HttpCode(204)
  @Audited('endpoint.deleted', byEndpoint)
  @ApiRoute('deleteEndpoint', 'Remove an event endpoint', 'Its deliveries go with it. The first endpoint: eventsTargetUrl is unset.')
  @ApiNoContentResponse()
  @ApiErrors('unauthorized', 'tenant_not_found', 'endpoint_not_found')
  async delete(@Param('tenantId') tenantId: string, @Param('endpointId', endpointIdPipe) endpointId: string): Promise<void> {
    await this.endpoints.delete(tenantId, endpointId);
  }

  @Post(':endpointId/secret')
  @HttpCode(200)
  @ShowsSecret()
  @Audited('endpoint.secret_rotated', byEndpoint)
  @ApiRoute(
    'rotateEndpointSecret',
    "Rotate an event endpoint's signing secret",
    'The new secret is in this answer only; during the overlap every delivery carries both signatures. The first endpoint answers `conflict`: its secret is the events secret.',
  )
  @ApiBody({ type: RotateEndpointSecretDto, required: false })
  @ApiOkResponse({ type: EndpointSecretDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'endpoint_not_found', 'conflict', 'secret_unreadable')
  async rotateSecret(
    @Param('tenantId') tenantId: string,
    @Param('endpointId', endpointIdPipe) endpointId: string,
    @Body() dto: RotateEndpointSecretDto,
  ): Promise<EndpointSecretDto> {
    return { secret: await this.endpoints.rotateSecret(tenantId, endpointId, dto?.overlapSeconds) };
  }

  @Post(':endpointId/redeliver')
  @HttpCode(202)
  @ApiRoute(
    'redeliverEndpoint',
    "Deliver again an endpoint's failed or missed events since a time",
    'Under the same webhook-id as before; `missed`: matched while the endpoint was disabled. Each delivery is queued once however often this is called. `conflict` while the endpoint is disabled.',
  )
  @ApiAcceptedResponse({ type: EndpointQueuedDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'endpoint_not_found', 'conflict')
  async redeliver(
    @Param('tenantId') tenantId: string,
    @Param('endpointId', endpointIdPipe) endpointId: string,
    @Body() dto: RedeliverEndpointDto,
  ): Promise<EndpointQueuedDto> {
    return { queued: await this.endpoints.redeliver(tenantId, endpointId, new Date(dto.since), dto.state ?? 'failed') };
  }

  @Post(':endpointId/test-filter')
  @HttpCode(200)
  @ApiRoute('testEndpointFilter', "Whether an endpoint's event types and filter take an event")
  @ApiOkResponse({ type: FilterMatchDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'endpoint_not_found')
  async testFilter(
    @Param('tenantId') tenantId: string,
    @Param('endpointId', endpointIdPipe) endpointId: string,
    @Body() dto: TestFilterDto,
  ): Promise<FilterMatchDto> {
    return { matches: await this.endpoints.testFilter(tenantId, endpointId, dto.event) };
  }
}
