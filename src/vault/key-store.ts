/**
 * Where the key-encryption key (KEK) lives (KEY_STORE): it wraps and unwraps the tenants' data keys and never
 * hands the KEK itself out. `local` holds the VAULT_KEYS ring in memory; `pkcs11` asks a PKCS#11 module (an HSM,
 * SoftHSM2). The vault's only contact with a key store is this interface (tenant-keys.service.ts).
 */
export interface KeyStore {
  /** KEY_STORE's value. */
  readonly kind: 'local' | 'pkcs11';
  /** Wraps a data key under the KEK that wraps new keys now, bound to `binding` (its tenant and version). */
  wrap(dataKey: Buffer, binding: KeyBinding): Promise<WrappedKey>;
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
  /** The KEK that wrapped it (`local:<kid>`, `pkcs11:<label>`). */
  kekId: string;
}

export interface KeyStoreDescription {
  store: 'local' | 'pkcs11';
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
