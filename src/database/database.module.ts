import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { MIGRATIONS } from './migrations.js';

@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => {
        if (!config.databaseUrl) throw new Error('DATABASE_URL must be resolved before the app starts');
        return {
          type: 'postgres' as const,
          url: config.databaseUrl,
          autoLoadEntities: true,
          synchronize: false,
          migrationsRun: false,
          migrations: MIGRATIONS,
          migrationsTableName: 'migrations',
          // A database that hangs instead of refusing must still fail a request (503) rather than hold it forever.
          extra: { max: config.databasePoolSize, connectionTimeoutMillis: 5000, application_name: `cws-connect ${config.instanceId}` },
        };
      },
    }),
  ],
})
export class DatabaseModule {}
