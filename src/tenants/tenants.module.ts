import { Module } from '@nestjs/common';
import { VaultModule } from '../vault/vault.module.js';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ChangesModule } from '../changes/changes.module.js';
import { ApiKeyCache } from './api-key-cache.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthThrottle } from './auth-throttle.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';
import { TenantApiKeysRepository } from './tenant-api-keys.repository.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsController } from './tenants.controller.js';
import { TenantsRepository } from './tenants.repository.js';
import { TenantsService } from './tenants.service.js';

@Module({
  imports: [VaultModule, TypeOrmModule.forFeature([TenantEntity, TenantApiKeyEntity]), ChangesModule],
  controllers: [TenantsController],
  providers: [TenantsRepository, TenantApiKeysRepository, TenantsService, ApiKeysService, ApiKeyCache, AuthThrottle],
  exports: [TenantsService, ApiKeysService, TenantsRepository, TenantApiKeysRepository, AuthThrottle],
})
export class TenantsModule {}
