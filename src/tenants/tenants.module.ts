import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { TenantDirectory } from '../auth/tenant-directory.js';
import { QuotaModule } from '../quota/quota.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { TenantKeysRevocation } from './tenant-keys-revocation.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsController } from './tenants.controller.js';
import { TenantsRepository } from './tenants.repository.js';
import { TenantsService } from './tenants.service.js';

@Module({
  imports: [AuditModule, VaultModule, AuthModule, ChangesModule, QuotaModule, TypeOrmModule.forFeature([TenantEntity])],
  controllers: [TenantsController],
  providers: [TenantsRepository, TenantsService, TenantKeysRevocation],
  exports: [TenantsService, TenantsRepository],
})
export class TenantsModule {
  constructor(directory: TenantDirectory, tenants: TenantsService) {
    // The tenant rule (auth) asks whether a tenant exists; auth sits below tenants, so they tell it here.
    directory.register((id) => tenants.exists(id));
  }
}
