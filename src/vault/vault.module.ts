import { Module } from '@nestjs/common';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { TokenVault } from './token-vault.service.js';
import { VaultInstancesRepository } from './vault-instances.repository.js';
import { VaultKeyCheck } from './vault-key-check.service.js';
import { VaultReencryptService } from './vault-reencrypt.service.js';
import { VaultRepository } from './vault.repository.js';

@Module({
  imports: [MetricsModule],
  providers: [TokenVault, VaultRepository, VaultInstancesRepository, VaultReencryptService, VaultKeyCheck],
  exports: [TokenVault, VaultRepository, VaultInstancesRepository],
})
export class VaultModule {}
