import { Module } from '@nestjs/common';
import { TenantKeyResealLoop } from './tenant-key-reseal-loop.service.js';
import { VaultInstances } from './vault-instances.service.js';
import { VaultModule } from './vault.module.js';

/**
 * The serving app's heartbeat in vault_instances and its background re-seal of rotated tenant keys; the command line
 * does neither (it serves nothing).
 */
@Module({
  imports: [VaultModule],
  providers: [VaultInstances, TenantKeyResealLoop],
})
export class VaultInstancesModule {}
