import { Global, Module } from '@nestjs/common';
import { TokenVault } from './token-vault.service.js';
import { VaultKeyCheck } from './vault-key-check.service.js';
import { VaultReencryptService } from './vault-reencrypt.service.js';
import { VaultRepository } from './vault.repository.js';

@Global()
@Module({
  providers: [TokenVault, VaultRepository, VaultReencryptService, VaultKeyCheck],
  exports: [TokenVault],
})
export class VaultModule {}
