import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ChangesModule } from '../changes/changes.module.js';
import { ApiKeyCache } from './api-key-cache.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthFailuresRepository } from './auth-failures.repository.js';
import { AuthThrottle } from './auth-throttle.js';
import { ClientAddress } from './client-address.js';
import { ConsoleSessionEntity } from './console-session.entity.js';
import { ConsoleSessionsRepository } from './console-sessions.repository.js';
import { ConsoleSessionsService } from './console-sessions.service.js';
import { FailureCounts } from './failure-counts.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';
import { TenantApiKeysRepository } from './tenant-api-keys.repository.js';
import { TenantDirectory } from './tenant-directory.js';

/**
 * Every credential the service accepts: tenant API keys (and their cache), the operator key, console sessions,
 * the throttle of failed checks (counted in auth_failures) and who the client is (ClientAddress). The app-wide guard (`ApiKeyAuthGuard`) is registered in AppModule.
 */
@Module({
  imports: [TypeOrmModule.forFeature([TenantApiKeyEntity, ConsoleSessionEntity]), ChangesModule],
  providers: [
    TenantApiKeysRepository,
    ApiKeysService,
    ApiKeyCache,
    AuthFailuresRepository,
    FailureCounts,
    ClientAddress,
    AuthThrottle,
    ConsoleSessionsRepository,
    ConsoleSessionsService,
    TenantDirectory,
  ],
  exports: [ApiKeysService, AuthThrottle, ConsoleSessionsService, TenantApiKeysRepository, TenantDirectory],
})
export class AuthModule {}
