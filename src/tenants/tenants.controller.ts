import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Patch, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { AppError } from '../common/app-error.js';
import { ApiKeysService } from './api-keys.service.js';
import { OperatorOnly } from './auth.decorators.js';
import { ApiKeyResponseDto, CreateApiKeyDto, CreatedApiKeyResponseDto } from './dto/api-key.dto.js';
import { CreatedTenantResponseDto, CreateTenantDto, EventsSecretResponseDto, TenantResponseDto, UpdateTenantDto } from './dto/tenant.dto.js';
import { TenantsService } from './tenants.service.js';

export const keyIdPipe = new ParseUUIDPipe({ exceptionFactory: () => new AppError('api_key_not_found', 'No such API key.') });

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
  @ApiCreatedResponse({ type: CreatedTenantResponseDto })
  async create(@Body() dto: CreateTenantDto): Promise<CreatedTenantResponseDto> {
    const { tenant, eventsSecret } = await this.tenants.create(dto);
    return { ...TenantResponseDto.from(tenant), eventsSecret };
  }

  @Get()
  @OperatorOnly()
  @ApiOkResponse({ type: [TenantResponseDto] })
  async list(): Promise<TenantResponseDto[]> {
    return (await this.tenants.list()).map(TenantResponseDto.from);
  }

  @Get(':tenantId')
  @ApiOkResponse({ type: TenantResponseDto })
  async get(@Param('tenantId') tenantId: string): Promise<TenantResponseDto> {
    return TenantResponseDto.from(await this.tenants.get(tenantId));
  }

  @Patch(':tenantId')
  @OperatorOnly()
  @ApiOkResponse({ type: TenantResponseDto })
  async update(@Param('tenantId') tenantId: string, @Body() dto: UpdateTenantDto): Promise<TenantResponseDto> {
    return TenantResponseDto.from(await this.tenants.update(tenantId, dto));
  }

  @Delete(':tenantId')
  @OperatorOnly()
  @HttpCode(204)
  @ApiNoContentResponse({ description: 'The tenant and everything it owns (connections and their tokens, keys, events) are gone.' })
  async delete(@Param('tenantId') tenantId: string): Promise<void> {
    await this.tenants.delete(tenantId);
  }

  @Post(':tenantId/events-secret')
  @OperatorOnly()
  @ApiCreatedResponse({ type: EventsSecretResponseDto })
  async rotateEventsSecret(@Param('tenantId') tenantId: string): Promise<EventsSecretResponseDto> {
    return { eventsSecret: await this.tenants.rotateEventsSecret(tenantId) };
  }

  @Post(':tenantId/api-keys')
  @OperatorOnly()
  @ApiCreatedResponse({ type: CreatedApiKeyResponseDto })
  async createKey(@Param('tenantId') tenantId: string, @Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyResponseDto> {
    const created = await this.keys.create(tenantId, dto.name ?? null);
    return { id: created.id, name: created.name, prefix: created.prefix, createdAt: created.createdAt.toISOString(), key: created.key };
  }

  @Get(':tenantId/api-keys')
  @OperatorOnly()
  @ApiOkResponse({ type: [ApiKeyResponseDto] })
  async listKeys(@Param('tenantId') tenantId: string): Promise<ApiKeyResponseDto[]> {
    return (await this.keys.list(tenantId)).map(ApiKeyResponseDto.from);
  }

  @Delete(':tenantId/api-keys/:keyId')
  @OperatorOnly()
  @HttpCode(204)
  @ApiNoContentResponse()
  async revokeKey(@Param('tenantId') tenantId: string, @Param('keyId', keyIdPipe) keyId: string): Promise<void> {
    await this.keys.revoke(tenantId, keyId);
  }
}
