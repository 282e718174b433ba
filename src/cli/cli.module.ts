import { DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { TenantEntity } from '../tenants/tenant.entity.js';
import { TenantsRepository } from '../tenants/tenants.repository.js';
import { VaultModule } from '../vault/vault.module.js';

/**
 * What operator commands need: configuration, the database, the vault and the tenants' table (a key command names a
 * tenant that must exist); no HTTP server, no schedulers.
 */
@Module({})
export class CliModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: CliModule,
      imports: [ConfigModule.forRoot(config), DatabaseModule, VaultModule, TypeOrmModule.forFeature([TenantEntity])],
      providers: [TenantsRepository],
    };
  }
}
