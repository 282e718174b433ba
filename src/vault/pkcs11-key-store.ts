import type { KeysConfig } from '../config/app-config.js';
import { ConfigError } from '../config/config-error.js';
import type { KeyStore } from './key-store.js';

/** KEY_STORE=pkcs11: not in this build yet (docs/security.md, "Keys"); the start stops with one line naming it. */
export const Pkcs11KeyStore = {
  open(settings: NonNullable<KeysConfig['pkcs11']>): Promise<KeyStore> {
    return Promise.reject(
      new ConfigError(
        'KEY_STORE',
        `pkcs11 (module ${settings.module}, token "${settings.tokenLabel}") is not supported by this build yet; use local`,
      ),
    );
  },
};
