import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { KEY_STORE, type KeyStore } from './key-store.js';
import { LocalKeyStore } from './local-key-store.js';
import { TenantKeyResealer } from './tenant-key-resealer.js';
import { TenantKeyResealsRepository } from './tenant-key-reseals.repository.js';
import { TenantKeysAdmin } from './tenant-keys-admin.service.js';
import { TenantKeys } from './tenant-keys.service.js';
import { TenantKeysRepository } from './tenant-keys.repository.js';
import { TokenVault } from './token-vault.service.js';
import { VaultInstancesRepository } from './vault-instances.repository.js';
import { VaultKeyCheck } from './vault-key-check.service.js';
import { VaultReencryptService } from './vault-reencrypt.service.js';
import { VaultRepository } from './vault.repository.js';

/** KEY_STORE's implementation. */
async function keyStoreOf(config: AppConfig, vault: TokenVault): Promise<KeyStore> {
  if (config.keys.store === 'pkcs11' && config.keys.pkcs11) {
    // Loaded only then: the native binding is needed by no one else.
    const { Pkcs11KeyStore } = await import('./pkcs11-key-store.js');
    return Pkcs11KeyStore.open(config.keys.pkcs11);
  }
  if (config.keys.store === 'transit' && config.keys.transit) {
    const { TransitKeyStore } = await import('./transit-key-store.js');
    return TransitKeyStore.open(config.keys.transit);
  }
  return new LocalKeyStore(vault);
}

@Module({
  imports: [AuditModule, MetricsModule],
  providers: [
    TokenVault,
    VaultRepository,
    VaultInstancesRepository,
    VaultReencryptService,
    VaultKeyCheck,
    TenantKeysRepository,
    TenantKeys,
    TenantKeysAdmin,
    TenantKeyResealsRepository,
    TenantKeyResealer,
    { provide: KEY_STORE, useFactory: keyStoreOf, inject: [APP_CONFIG, TokenVault] },
  ],
  exports: [
    TokenVault,
    VaultRepository,
    VaultInstancesRepository,
    TenantKeys,
    TenantKeysRepository,
    TenantKeysAdmin,
    TenantKeyResealsRepository,
    TenantKeyResealer,
  ],
})
export class VaultModule {}
