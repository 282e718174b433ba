import { DynamicModule, Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { VaultModule } from '../vault/vault.module.js';

/** What operator commands need: configuration, the database and the vault; no HTTP server, no schedulers. */
@Module({})
export class CliModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: CliModule,
      imports: [ConfigModule.forRoot(config), DatabaseModule, VaultModule],
    };
  }
}
