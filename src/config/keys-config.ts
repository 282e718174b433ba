import { ConfigError } from './config-error.js';
import { stripSlash } from './value-formats.js';
import type { Values } from './variable.js';
import type { SERVICE_VARIABLES } from './variables.js';

// Envelope encryption's configuration (docs/security.md, "Keys"): the KEK's store and its family of variables, and
// how long unwrapped data keys are kept.

export interface KeysConfig {
  store: 'local' | 'pkcs11' | 'transit';
  /** With KEY_STORE=pkcs11; the PIN is a secret, never logged. */
  pkcs11: { module: string; tokenLabel: string; pin: string; kekLabel: string } | null;
  /** With KEY_STORE=transit; the token is a secret, never logged. */
  transit: TransitConfig | null;
  cacheTtlMs: number;
  cacheGraceMs: number;
}

export interface TransitConfig {
  /** TRANSIT_ADDR without a trailing slash. */
  addr: string;
  token: string;
  mount: string;
  keyName: string;
  namespace: string | null;
  /** TRANSIT_CA_FILE's path (read when the store opens). */
  caFile: string | null;
}

/** KEY_STORE and its family: the PKCS#11 (Transit) variables are required together with `pkcs11` (`transit`), and ignored otherwise. */
export function readKeys(v: Values<typeof SERVICE_VARIABLES>): KeysConfig {
  let pkcs11: KeysConfig['pkcs11'] = null;
  if (v.KEY_STORE === 'pkcs11') {
    const missing = (['PKCS11_MODULE', 'PKCS11_TOKEN_LABEL', 'PKCS11_PIN', 'PKCS11_KEK_LABEL'] as const).find((name) => !v[name]);
    if (missing) throw new ConfigError(missing, 'is required when KEY_STORE=pkcs11');
    pkcs11 = {
      module: v.PKCS11_MODULE ?? '',
      tokenLabel: v.PKCS11_TOKEN_LABEL ?? '',
      pin: v.PKCS11_PIN ?? '',
      kekLabel: v.PKCS11_KEK_LABEL ?? '',
    };
  }
  let transit: TransitConfig | null = null;
  if (v.KEY_STORE === 'transit') {
    const missing = (['TRANSIT_ADDR', 'TRANSIT_TOKEN', 'TRANSIT_KEY_NAME'] as const).find((name) => !v[name]);
    if (missing) throw new ConfigError(missing, 'is required when KEY_STORE=transit');
    transit = {
      addr: stripSlash(v.TRANSIT_ADDR ?? ''),
      token: v.TRANSIT_TOKEN ?? '',
      mount: v.TRANSIT_MOUNT.replace(/^\/+|\/+$/g, ''),
      keyName: v.TRANSIT_KEY_NAME ?? '',
      namespace: v.TRANSIT_NAMESPACE ?? null,
      caFile: v.TRANSIT_CA_FILE ?? null,
    };
  }
  return { store: v.KEY_STORE, pkcs11, transit, cacheTtlMs: v.KEY_CACHE_TTL, cacheGraceMs: v.KEY_CACHE_GRACE };
}
