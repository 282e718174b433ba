import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { AuditBy, type AuditContext } from '../audit/audit-context.js';
import { Audited } from '../audit/audited.decorator.js';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { uuidParam } from '../common/params.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import { OperatorOnly, ShowsSecret } from '../auth/auth.decorators.js';
import { ApiKeyResponseDto, CreateApiKeyDto, CreatedApiKeyResponseDto } from './dto/api-key.dto.js';
import {
  CreatedTenantResponseDto,
  CreateTenantDto,
  EventsSecretResponseDto,
  RotateEventsSecretDto,
  TenantResponseDto,
  UpdateTenantDto,
  ListTenantsQueryDto,
} from './dto/tenant.dto.js';
import { TenantsService } from './tenants.service.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const keyIdPipe = uuidParam('api_key_not_found', 'No such API key.');

@ApiTags('tenants')
@ApiBearerAuth()
@Controller('v1/tenants')
export class TenantsController {
  constructor(
    private readonly tenants: TenantsService,
    private readonly keys: ApiKeysService,
  ) {}

  @Post()
  @OperatorOnly()
  @ShowsSecret()
  @Audited('tenant.created', (_, result) => ({ tenantId: (result as CreatedTenantResponseDto | undefined)?.id ?? null, target: null }))
  @ApiRoute('createTenant', 'Create a tenant', "The answer carries the tenant's `eventsSecret`, shown only here.")
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden', 'tenant_exists', 'environment_not_configured', 'target_not_allowed')
  @ApiCreatedResponse({ type: CreatedTenantResponseDto })
  async create(@Body() dto: CreateTenantDto): Promise<CreatedTenantResponseDto> {
    const { tenant, eventsSecret } = await this.tenants.create(dto);
    return { ...TenantResponseDto.from(tenant, this.tenants.retentionDaysOf(tenant)), eventsSecret };
  }

  @Get()
  @OperatorOnly()
  @ApiRoute(
    'listTenants',
    'List the tenants',
    'In creation order. With `limit`, one page of at most that many; the next page starts `after` the last id answered (a page shorter than `limit` is the last).',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden')
  @ApiOkResponse({ type: [TenantResponseDto] })
  async list(@Query() query: ListTenantsQueryDto): Promise<TenantResponseDto[]> {
    return (await this.tenants.list(query.limit, query.after)).map((t) => TenantResponseDto.from(t, this.tenants.retentionDaysOf(t)));
  }

  @Get(':tenantId')
  @ApiRoute('getTenant', 'Get a tenant')
  @ApiErrors('unauthorized', 'tenant_not_found')
  @ApiOkResponse({ type: TenantResponseDto })
  async get(@Param('tenantId') tenantId: string): Promise<TenantResponseDto> {
    const tenant = await this.tenants.get(tenantId);
    return TenantResponseDto.from(tenant, this.tenants.retentionDaysOf(tenant), await this.tenants.quotaUsageOf(tenant));
  }

  @Patch(':tenantId')
  @OperatorOnly()
  @Audited('tenant.updated')
  @ApiRoute(
    'updateTenant',
    'Change a tenant',
    'Its environment cannot be changed. `quotas` sets its own upstream budgets (docs/quotas.md).',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden', 'tenant_not_found', 'target_not_allowed', 'endpoint_limit')
  @ApiOkResponse({ type: TenantResponseDto })
  async update(@Param('tenantId') tenantId: string, @Body() dto: UpdateTenantDto): Promise<TenantResponseDto> {
    const tenant = await this.tenants.update(tenantId, dto);
    return TenantResponseDto.from(tenant, this.tenants.retentionDaysOf(tenant), await this.tenants.quotaUsageOf(tenant));
  }

  @Delete(':tenantId')
  @OperatorOnly()
  @Audited('tenant.deleted')
  @HttpCode(204)
  @ApiRoute('deleteTenant', 'Delete a tenant and everything it owns')
  @ApiErrors('unauthorized', 'forbidden', 'tenant_not_found')
  @ApiNoContentResponse({
    description:
      'The tenant is gone at once (404 on every route, its keys refused); everything it owns (connections and their tokens, sessions, keys, events, attempts) is removed in the background in small batches that never block other tenants.',
  })
  async delete(@Param('tenantId') tenantId: string, @AuditBy() by: AuditContext): Promise<void> {
    await this.tenants.delete(tenantId, by);
  }

  @Post(':tenantId/events-secret')
  @OperatorOnly()
  @Audited('events_secret.rotated')
  @ShowsSecret()
  @ApiRoute(
    'rotateEventsSecret',
    'Rotate the events secret, optionally with an overlap during which both secrets sign',
    'The new secret is in this answer only.',
  )
  @ApiBody({ type: RotateEventsSecretDto, required: false })
  @ApiCreatedResponse({ type: EventsSecretResponseDto })
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden', 'tenant_not_found', 'secret_unreadable')
  async rotateEventsSecret(@Param('tenantId') tenantId: string, @Body() dto: RotateEventsSecretDto): Promise<EventsSecretResponseDto> {
    return { eventsSecret: await this.tenants.rotateEventsSecret(tenantId, dto.overlapSeconds ?? 0) };
  }

  @Post(':tenantId/api-keys')
  @OperatorOnly()
  @Audited('api_key.created', (params, result) => ({
    tenantId: params.tenantId,
    target: result ? `api-keys/${(result as CreatedApiKeyResponseDto).id}` : null,
  }))
  @ShowsSecret()
  @ApiRoute('createApiKey', 'Create a tenant API key', 'The key is in this answer only.')
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden', 'tenant_not_found')
  @ApiCreatedResponse({ type: CreatedApiKeyResponseDto })
  async createKey(@Param('tenantId') tenantId: string, @Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyResponseDto> {
    const created = await this.keys.create(tenantId, dto.name ?? null);
    return { id: created.id, name: created.name, prefix: created.prefix, createdAt: created.createdAt.toISOString(), key: created.key };
  }

  @Get(':tenantId/api-keys')
  @OperatorOnly()
  @ApiRoute('listApiKeys', "List a tenant's API keys (never the keys themselves)")
  @ApiErrors('unauthorized', 'forbidden', 'tenant_not_found')
  @ApiOkResponse({ type: [ApiKeyResponseDto] })
  async listKeys(@Param('tenantId') tenantId: string): Promise<ApiKeyResponseDto[]> {
    return (await this.keys.list(tenantId)).map(ApiKeyResponseDto.from);
  }

  @Delete(':tenantId/api-keys/:keyId')
  @OperatorOnly()
  // A key id that is not a UUID named nothing, and the path is the caller's text: it is not copied into the row.
  @Audited('api_key.revoked', (params) => ({
    tenantId: params.tenantId,
    target: UUID.test(params.keyId) ? `api-keys/${params.keyId}` : null,
  }))
  @HttpCode(204)
  @ApiRoute('revokeApiKey', 'Revoke a tenant API key')
  @ApiErrors('unauthorized', 'forbidden', 'tenant_not_found', 'api_key_not_found')
  @ApiNoContentResponse()
  async revokeKey(@Param('tenantId') tenantId: string, @Param('keyId', keyIdPipe) keyId: string): Promise<void> {
    await this.keys.revoke(tenantId, keyId);
  }
}
