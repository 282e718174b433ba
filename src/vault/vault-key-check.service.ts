import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { ConfigError } from '../config/config-error.js';
import { SEALED_COLUMNS, WRAPPED_KEYS } from './sealed-columns.js';
import { type KekRef, TokenVault } from './token-vault.service.js';
import { VaultRepository } from './vault.repository.js';

const CHECK_PLAINTEXT = 'cws-connect vault key check';

function checkRef(kid: string): KekRef {
  return { table: 'vault_key_checks', id: kid, column: 'check_enc' };
}

/**
 * At start, before anything is served or renewed: the key ring must be the one the database was written with.
 * Each key id the database knows has a check value sealed with that key (vault_key_checks, written when a key
 * is first seen); a key of VAULT_KEYS whose check value does not open (same id, other bytes), or a key id the
 * database still holds values under that VAULT_KEYS lacks, refuses the start with one line naming VAULT_KEYS.
 * Without it, such a ring started fine and answered 500 on every call that needed a token.
 */
@Injectable()
export class VaultKeyCheck implements OnModuleInit {
  // Explicit tokens: the CLI also runs under tsx, which emits no decorator metadata.
  constructor(
    @Inject(TokenVault) private readonly vault: TokenVault,
    @Inject(VaultRepository) private readonly repo: VaultRepository,
  ) {}

  async onModuleInit(): Promise<void> {
    let checks;
    try {
      checks = await this.repo.listKeyChecks();
    } catch (e) {
      // Not migrated yet (the migrate command itself, or readiness reports the pending migration).
      if ((e as { code?: unknown }).code === '42P01' || (e as { driverError?: { code?: unknown } }).driverError?.code === '42P01') return;
      throw e;
    }
    const recorded = new Map(checks.map((c) => [c.kid, c.checkEnc]));
    const ring = this.vault.keyIds();
    for (const kid of ring) {
      let stored = recorded.get(kid) ?? null;
      if (stored === null && recorded.has(kid)) await this.verifyAgainstData(kid);
      if (stored === null) stored = await this.repo.recordKeyCheck(kid, this.vault.sealWith(kid, CHECK_PLAINTEXT, checkRef(kid)));
      if (!this.opens(stored, kid)) {
        throw new ConfigError(
          'VAULT_KEYS',
          `key "${kid}" is not the key this database's secrets were sealed with under that id (its check value does not open); set VAULT_KEYS to the keys this database was written with`,
        );
      }
    }
    for (const { kid } of checks) {
      if (ring.includes(kid)) continue;
      if (await this.holdsValuesUnder(kid)) {
        throw new ConfigError(
          'VAULT_KEYS',
          `the database holds secrets sealed under key "${kid}", which VAULT_KEYS lacks; add that key back (kid:base64 after the active one), and re-encrypt (npm run cli -- vault:reencrypt, which also rewraps the tenants' data keys) before dropping it`,
        );
      }
      // Retired after re-encryption: nothing is sealed under it any more.
      await this.repo.forgetKeyCheck(kid);
    }
  }

  private opens(checkEnc: string, kid: string): boolean {
    return this.vault.tryOpen(checkEnc, checkRef(kid)) === CHECK_PLAINTEXT;
  }

  /** A key id found in existing data (by the migration): one of its values must open before its check value is written. */
  private async verifyAgainstData(kid: string): Promise<void> {
    for (const col of await this.repo.existingColumns([...SEALED_COLUMNS, WRAPPED_KEYS])) {
      const sample = await this.repo.findOneUnderKey(col, kid);
      if (!sample) continue;
      if (this.vault.tryOpen(sample.value, { table: col.table, id: sample.id, column: col.column }) === null) {
        throw new ConfigError(
          'VAULT_KEYS',
          `key "${kid}" does not open the secrets this database holds under that id (${col.table}.${col.column}); set VAULT_KEYS to the keys this database was written with`,
        );
      }
      return;
    }
  }

  private async holdsValuesUnder(kid: string): Promise<boolean> {
    for (const col of await this.repo.existingColumns([...SEALED_COLUMNS, WRAPPED_KEYS]))
      if (await this.repo.findOneUnderKey(col, kid)) return true;
    return false;
  }
}
