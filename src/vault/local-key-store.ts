import { type KeyBinding, type KeyStore, type KeyStoreDescription, keyRowId, type WrappedKey } from './key-store.js';
import { type KekRef, TokenVault, VaultError } from './token-vault.service.js';

const PREFIX = 'local:';

/**
 * KEY_STORE=local: the VAULT_KEYS ring is the KEK. A data key is wrapped as a value of the ring's own format
 * (AES-256-GCM, `v1.<kid>...`), bound to `tenant_keys.<tenant>/<version>.wrapped_key`, under the key every live
 * instance holds (the same rule as every other value: vault-instances.service.ts). Rotating the KEK is therefore
 * the ring's rotation: a new key first in VAULT_KEYS, the instances rolled, then `keys rotate-kek`.
 */
export class LocalKeyStore implements KeyStore {
  readonly kind = 'local' as const;

  constructor(private readonly vault: TokenVault) {}

  wrap(dataKey: Buffer, binding: KeyBinding, kek?: string): Promise<WrappedKey> {
    if (kek !== undefined) return Promise.reject(noOwnKek());
    const kid = this.vault.sealingKid;
    return Promise.resolve({
      wrapped: this.vault.sealWith(kid, dataKey.toString('base64url'), wrapRef(binding)),
      kekId: `${PREFIX}${kid}`,
    });
  }

  unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer> {
    try {
      const text = this.vault.openKek(wrapped.wrapped, wrapRef(binding));
      const key = Buffer.from(text, 'base64url');
      if (key.length !== 32) throw new VaultError(`the data key ${keyRowId(binding)} is malformed`, 'tenant_keys', 'wrapped_key');
      return Promise.resolve(key);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /**
   * Not offered: this store's KEK is the VAULT_KEYS ring, held in every instance's configuration and its copies, so a
   * key given to one tenant could not be shown destroyed everywhere (docs/keys.md).
   */
  ownKek(): Promise<string> {
    return Promise.reject(noOwnKek());
  }

  describe(): KeyStoreDescription {
    return { store: 'local', kekId: `${PREFIX}${this.vault.sealingKid}` };
  }

  health(): Promise<'available'> {
    return Promise.resolve('available');
  }
}

/** Where a wrapped data key is sealed (its AAD): the tenant and the version. */
export function wrapRef(binding: KeyBinding): KekRef {
  return { table: 'tenant_keys', id: keyRowId(binding), column: 'wrapped_key' };
}

function noOwnKek(): Error {
  return new Error('KEY_STORE=local offers no per-tenant KEK: use KEY_STORE=pkcs11 or transit (docs/keys.md)');
}
