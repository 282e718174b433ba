import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { parseVaultKeys } from '../../src/config/app-config.js';
import { LocalKeyStore } from '../../src/vault/local-key-store.js';
import { TenantKeys } from '../../src/vault/tenant-keys.service.js';
import { TenantKeysRepository } from '../../src/vault/tenant-keys.repository.js';
import { TokenVault } from '../../src/vault/token-vault.service.js';

/**
 * A TokenVault outside any app, on the VAULT_KEYS ring `vaultKeys`: it seals in the ring's format (what release
 * 0.2.0 wrote), and with `db` it also opens values sealed with a tenant's data key (KEY_STORE=local), reading
 * tenant_keys through that client. For seeding and checking rows in tests, never for output.
 */
export function standaloneVault(vaultKeys: string, db?: pg.Pool | pg.Client): TokenVault {
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  if (db) {
    // What TypeORM's DataSource.query answers: the rows, or [rows, count] for an UPDATE or a DELETE.
    const query = async (sql: string, params?: unknown[]) => {
      const r = await db.query(sql, params);
      return r.command === 'UPDATE' || r.command === 'DELETE' ? [r.rows, r.rowCount] : r.rows;
    };
    const source = { query } as unknown as DataSource;
    new TenantKeys(
      { keys: { store: 'local', pkcs11: null, transit: null, cacheTtlMs: 60_000, cacheGraceMs: 0 } },
      new LocalKeyStore(vault),
      new TenantKeysRepository(source),
      vault,
    );
  }
  return vault;
}
