/**
 * Where the key-encryption key (KEK) lives (KEY_STORE): it wraps and unwraps the tenants' data keys and never
 * hands the KEK itself out. `local` holds the VAULT_KEYS ring in memory; `pkcs11` asks a PKCS#11 module (an HSM,
 * SoftHSM2); `transit` asks a HashiCorp Vault / OpenBao Transit secrets engine over HTTP. The vault's only contact
 * with a key store is this interface (tenant-keys.service.ts).
 */
export interface KeyStore {
  /** KEY_STORE's value. */
  readonly kind: KeyStoreKind;
  /**
   * Wraps a data key, bound to `binding` (its tenant and version), under the KEK that wraps new keys now, or under
   * `kek`: a KEK of the store given to one tenant (a PKCS#11 key label, a Transit key name: docs/keys.md).
   */
  wrap(dataKey: Buffer, binding: KeyBinding, kek?: string): Promise<WrappedKey>;
  /**
   * The id of what `kek` (a label or key name of this store) wraps with now, once the store has it: a tenant's own
   * KEK is checked before any key is wrapped under it. A KEK the store does not have, or a store that offers none
   * (`local`), is an Error naming it.
   */
  ownKek(kek: string): Promise<string>;
  /**
   * The data key `wrapped` holds. A wrapped key that does not unwrap (another binding, another KEK, damaged) is a
   * VaultError; a store that cannot be reached or does not answer in time is a KeyStoreUnavailable.
   */
  unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer>;
  /** What the store is and which KEK wraps new keys: names and ids only, never key material or a PIN. */
  describe(): KeyStoreDescription;
  /** Whether the store answers now (a cheap round trip); never throws. */
  health(): Promise<'available' | 'unavailable'>;
}

/** What a data key is bound to: a wrapped key moved to another tenant's row (or version) does not unwrap. */
export interface KeyBinding {
  tenantId: string;
  version: number;
}

export interface WrappedKey {
  /** Text: the wrapped bytes in the store's own format. */
  wrapped: string;
  /** The KEK that wrapped it (`local:<kid>`, `pkcs11:<label>`, `transit:<key name>:v<key version>`). */
  kekId: string;
}

export type KeyStoreKind = 'local' | 'pkcs11' | 'transit';

export interface KeyStoreDescription {
  store: KeyStoreKind;
  /** The KEK that wraps new data keys now. */
  kekId: string;
}

/** The key store cannot be reached (or did not answer in time): the tenant's calls get 503 key_store_unavailable. */
export class KeyStoreUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyStoreUnavailable';
  }
}

/** The Nest token of the configured KeyStore (vault.module.ts). */
export const KEY_STORE = Symbol('KEY_STORE');

/** The id a wrapped key is bound to (tenant_keys.id): `<tenant>/<version>`. */
export function keyRowId(binding: KeyBinding): string {
  return `${binding.tenantId}/${binding.version}`;
}

/** The associated data a wrapped key is bound with by the stores that encrypt it with AES-GCM (pkcs11, transit). */
export function bindingAad(binding: KeyBinding): Buffer {
  return Buffer.from(`cws-connect/tenant-key\0${keyRowId(binding)}`, 'utf8');
}
