import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ChangesModule } from '../changes/changes.module.js';
import { ApiKeyCache } from './api-key-cache.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthThrottle } from './auth-throttle.js';
import { ConsoleSessionEntity } from './console-session.entity.js';
import { ConsoleSessionsRepository } from './console-sessions.repository.js';
import { ConsoleSessionsService } from './console-sessions.service.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';
import { TenantApiKeysRepository } from './tenant-api-keys.repository.js';
import { TenantDirectory } from './tenant-directory.js';

/**
 * Every credential the service accepts: tenant API keys (and their cache), the operator key, console sessions,
 * and the limiter of failed checks. The app-wide guard (`ApiKeyAuthGuard`) is registered in AppModule.
 */
@Module({
  imports: [TypeOrmModule.forFeature([TenantApiKeyEntity, ConsoleSessionEntity]), ChangesModule],
  providers: [
    TenantApiKeysRepository,
    ApiKeysService,
    ApiKeyCache,
    AuthThrottle,
    ConsoleSessionsRepository,
    ConsoleSessionsService,
    TenantDirectory,
  ],
  exports: [ApiKeysService, AuthThrottle, ConsoleSessionsService, TenantApiKeysRepository, TenantDirectory],
})
export class AuthModule {}
