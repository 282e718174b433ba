import { Module } from '@nestjs/common';
import { VaultInstances } from './vault-instances.service.js';
import { VaultModule } from './vault.module.js';

/** The serving app's heartbeat in vault_instances; the command line does not register (it serves nothing). */
@Module({
  imports: [VaultModule],
  providers: [VaultInstances],
})
export class VaultInstancesModule {}
