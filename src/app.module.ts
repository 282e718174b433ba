import { DynamicModule, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { Clock, SystemClock } from './common/clock.js';
import type { AppConfig } from './config/app-config.js';
import { ConfigModule } from './config/config.module.js';
import { ConnectionsModule } from './connections/connections.module.js';
import { ConsoleModule } from './console/console.module.js';
import { DatabaseModule } from './database/database.module.js';
import { EventsModule } from './events/events.module.js';
import { FacadeModule } from './facade/facade.module.js';
import { loggerParams } from './ops/logger.js';
import { OpsModule } from './ops/ops.module.js';
import { RefreshModule } from './refresh/refresh.module.js';
import { TenantsModule } from './tenants/tenants.module.js';
import { UpstreamModule } from './upstream/upstream.module.js';
import { VaultModule } from './vault/vault.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';

export interface AppOptions {
  clock?: Clock;
  /** Where log lines go (tests collect them); stdout when unset. */
  logDestination?: DestinationStream;
}

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, options: AppOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config, options.clock ?? new SystemClock()),
        LoggerModule.forRoot(loggerParams(config, options.logDestination)),
        DatabaseModule,
        OpsModule,
        VaultModule,
        UpstreamModule,
        EventsModule,
        TenantsModule,
        ConnectionsModule,
        ScheduleModule.forRoot(),
        RefreshModule,
        FacadeModule,
        WebhooksModule,
        ConsoleModule,
      ],
    };
  }
}
