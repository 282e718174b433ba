import { DynamicModule, Module, ValidationPipe } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR, APP_PIPE } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { AuditInterceptor } from './audit/audit.interceptor.js';
import { AgentsModule } from './agents/agents.module.js';
import { AuditModule } from './audit/audit.module.js';
import { ApiKeyAuthGuard } from './auth/api-key-auth.guard.js';
import { AuthModule } from './auth/auth.module.js';
import { AppExceptionFilter } from './common/app-exception.filter.js';
import { Clock, SystemClock } from './common/clock.js';
import type { AppConfig } from './config/app-config.js';
import { ConfigModule } from './config/config.module.js';
import { ConnectModule } from './connect/connect.module.js';
import { ConnectionsModule } from './connections/connections.module.js';
import { ConsoleModule } from './console/console.module.js';
import { DatabaseModule } from './database/database.module.js';
import { EventsModule } from './events/events.module.js';
import { FacadeModule } from './facade/facade.module.js';
import type { Logging } from './telemetry/logger.js';
import { OpsModule } from './ops/ops.module.js';
import { RecordsModule } from './records/records.module.js';
import { RefreshModule } from './refresh/refresh.module.js';
import { RetentionModule } from './retention/retention.module.js';
import { TenantsModule } from './tenants/tenants.module.js';
import { UpstreamModule } from './upstream/upstream.module.js';
import { VaultModule } from './vault/vault.module.js';
import { VaultInstancesModule } from './vault/vault-instances.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';

export interface AppOptions {
  clock?: Clock;
  /** Where log lines go (tests collect them); stdout when unset. */
  logDestination?: DestinationStream;
}

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, logging: Logging, options: AppOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config, options.clock ?? new SystemClock()),
        LoggerModule.forRoot(logging.params),
        DatabaseModule,
        OpsModule,
        VaultModule,
        VaultInstancesModule,
        // Every credential the service accepts, which the app-wide guard below checks.
        AuthModule,
        UpstreamModule,
        EventsModule,
        TenantsModule,
        ConnectModule,
        ConnectionsModule,
        ScheduleModule.forRoot(),
        RefreshModule,
        FacadeModule,
        WebhooksModule,
        RecordsModule,
        RetentionModule,
        ConsoleModule,
        AuditModule,
        AgentsModule,
      ],
      // What applies to every route: the API-key check, the one error shape, DTO validation, the audit of @Audited routes.
      providers: [
        { provide: APP_GUARD, useClass: ApiKeyAuthGuard },
        { provide: APP_INTERCEPTOR, useClass: AuditInterceptor },
        { provide: APP_FILTER, useClass: AppExceptionFilter },
        {
          provide: APP_PIPE,
          useValue: new ValidationPipe({
            whitelist: true,
            forbidNonWhitelisted: true,
            transform: true,
            stopAtFirstError: false,
            // The error keeps neither the object nor the value: only the messages are answered.
            validationError: { target: false, value: false },
          }),
        },
      ],
    };
  }
}
