import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ChangesModule } from '../changes/changes.module.js';
import { ConsoleSessionsModule } from '../console/console-sessions.module.js';
import { ApiKeyAuthGuard } from './api-key-auth.guard.js';
import { ApiKeyCache } from './api-key-cache.js';
import { ApiKeysService } from './api-keys.service.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';
import { TenantApiKeysRepository } from './tenant-api-keys.repository.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsController } from './tenants.controller.js';
import { TenantsRepository } from './tenants.repository.js';
import { TenantsService } from './tenants.service.js';

@Module({
  imports: [TypeOrmModule.forFeature([TenantEntity, TenantApiKeyEntity]), ChangesModule, ConsoleSessionsModule],
  controllers: [TenantsController],
  providers: [TenantsRepository, TenantApiKeysRepository, TenantsService, ApiKeysService, ApiKeyCache, { provide: APP_GUARD, useClass: ApiKeyAuthGuard }],
  exports: [TenantsService, ApiKeysService],
})
export class TenantsModule {}
