// The auth module's public face: nothing else of src/auth/ is imported from outside it.
export { AuthModule } from './auth.module.js';
export { ApiKeyAuthGuard } from './api-key-auth.guard.js';
export { ApiKeysService, bearerOf, type CreatedApiKey } from './api-keys.service.js';
export { AuthThrottle, clientOf, throttled } from './auth-throttle.js';
export { CurrentPrincipal, OperatorOnly, Public, ShowsSecret, type AuthenticatedRequest, type Principal } from './auth.decorators.js';
export { CONSOLE_COOKIE, ConsoleSessionsService, type ConsoleSessionView } from './console-sessions.service.js';
export { credentialFirst, needsCredential } from './request-credential.js';
export type { TenantApiKeyEntity } from './tenant-api-key.entity.js';
export { TenantApiKeysRepository } from './tenant-api-keys.repository.js';
export { TenantDirectory } from './tenant-directory.js';
