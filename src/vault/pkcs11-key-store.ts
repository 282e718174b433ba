import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as Pkcs11Module from 'pkcs11js';
import type { KeysConfig } from '../config/keys-config.js';
import { ConfigError } from '../config/config-error.js';
import {
  bindingAad,
  type KeyBinding,
  type KeyStore,
  type KeyStoreDescription,
  KeyStoreUnavailable,
  keyRowId,
  type WrappedKey,
} from './key-store.js';
import { VaultError } from './token-vault.service.js';

type Pkcs11 = typeof Pkcs11Module;
type Settings = NonNullable<KeysConfig['pkcs11']>;

const FORMAT = 'p11';
const IV_BYTES = 12;
const TAG_BITS = 128;
/** Return values that mean the wrapped key itself does not decrypt (another binding, damaged): the value's problem. */
const NOT_OURS = new Set([0x40 /* CKR_ENCRYPTED_DATA_INVALID */, 0x41 /* CKR_ENCRYPTED_DATA_LEN_RANGE */]);
/**
 * A session or handle this store held is no longer valid (the module was initialized again, by this store or by
 * another user of the same module in the process; the token was logged out): the call is tried once more on a
 * fresh session before anything is concluded about the value or the store.
 */
const STALE_HANDLE = new Set([
  0x60 /* CKR_KEY_HANDLE_INVALID */, 0x82 /* CKR_OBJECT_HANDLE_INVALID */, 0xb0 /* CKR_SESSION_CLOSED */,
  0xb3 /* CKR_SESSION_HANDLE_INVALID */, 0x101 /* CKR_USER_NOT_LOGGED_IN */, 0x190 /* CKR_CRYPTOKI_NOT_INITIALIZED */,
]);
/** After the token was unreachable, the module is initialized again before a new session, at most this often. */
const REINITIALIZE_MS = 1000;

/**
 * KEY_STORE=pkcs11: the KEK is an AES key on a PKCS#11 token (an HSM, SoftHSM2), found by PKCS11_KEK_LABEL, and never
 * leaves it. A data key is wrapped by encrypting it on the token with CKM_AES_GCM (a fresh 96-bit IV, the tenant and
 * version as AAD): `p11.<iv>.<ciphertext and tag>` (base64url). pkcs11js is a synchronous native binding: each call is
 * one short round trip to the module. A failure of the module, the session, the token or the key handle is the store
 * being unreachable (503 key_store_unavailable for uncached tenants); the store logs in again at the next call, after
 * finalizing and initializing the module again (at most once a second): a module keeps the slots it found at
 * C_Initialize, so a token that went away and came back (SoftHSM2's token directory restored, a device reattached)
 * is seen again only then, and the store serves again without a restart.
 */
export class Pkcs11KeyStore implements KeyStore {
  readonly kind = 'pkcs11' as const;
  private session: Buffer | null = null;
  private key: Buffer | null = null;
  /** The token was unreachable: the module is initialized again before the next session. */
  private stale = false;
  private reinitializedAt = 0;

  private constructor(
    private readonly p11: Pkcs11,
    private readonly module: InstanceType<Pkcs11['PKCS11']>,
    private readonly settings: Settings,
  ) {}

  /** Loads the module and finds the KEK: a missing module, token or key stops the start with one line naming it. */
  static open(settings: Settings): Promise<KeyStore> {
    let p11: Pkcs11;
    try {
      p11 = createRequire(import.meta.url)('pkcs11js') as Pkcs11;
    } catch {
      return Promise.reject(new ConfigError('KEY_STORE', 'is pkcs11, but the pkcs11js binding is not installed (npm ci)'));
    }
    const module = new p11.PKCS11();
    try {
      module.load(settings.module);
      try {
        module.C_Initialize();
      } catch (e) {
        // Another store of this process opened the module first (a test, a CLI command beside the app): it is shared.
        if (codeOf(e) !== 0x191 /* CKR_CRYPTOKI_ALREADY_INITIALIZED */) throw e;
      }
    } catch (e) {
      return Promise.reject(
        new ConfigError('PKCS11_MODULE', `could not be loaded (${describe(e)}): expected a PKCS#11 module at ${settings.module}`),
      );
    }
    const store = new Pkcs11KeyStore(p11, module, settings);
    try {
      store.connect();
    } catch (e) {
      if (e instanceof ConfigError) return Promise.reject(e);
      return Promise.reject(new ConfigError('PKCS11_TOKEN_LABEL', `the token could not be opened: ${describe(e)}`));
    }
    return Promise.resolve(store);
  }

  wrap(dataKey: Buffer, binding: KeyBinding, kek?: string): Promise<WrappedKey> {
    return this.call(() => {
      const iv = randomBytes(IV_BYTES);
      const out = this.crypt('encrypt', iv, binding, dataKey, Buffer.alloc(dataKey.length + TAG_BITS / 8), kek);
      return { wrapped: `${FORMAT}.${iv.toString('base64url')}.${out.toString('base64url')}`, kekId: this.kekId(kek) };
    });
  }

  /** A tenant's own KEK: an AES key of the same token under its own label. */
  ownKek(kek: string): Promise<string> {
    return this.call(() => {
      this.findKey(this.connected().session, kek);
      return this.kekId(kek);
    });
  }

  unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer> {
    const parts = wrapped.wrapped.split('.');
    // A key wrapped by another KEK of the same token (before a KEK rotation finished) is opened with that one.
    if (parts.length !== 3 || parts[0] !== FORMAT || !wrapped.kekId.startsWith('pkcs11:')) {
      return Promise.reject(
        new VaultError(
          `the data key ${keyRowId(binding)} is not wrapped by ${this.kekId()} (it names ${wrapped.kekId})`,
          'tenant_keys',
          'wrapped_key',
        ),
      );
    }
    const iv = Buffer.from(parts[1], 'base64url');
    const sealed = Buffer.from(parts[2], 'base64url');
    return this.call(() => {
      try {
        const key = this.crypt('decrypt', iv, binding, sealed, Buffer.alloc(sealed.length), wrapped.kekId.slice('pkcs11:'.length));
        if (key.length !== 32) throw new VaultError(`the data key ${keyRowId(binding)} is malformed`, 'tenant_keys', 'wrapped_key');
        return Buffer.from(key);
      } catch (e) {
        if (e instanceof VaultError || STALE_HANDLE.has(codeOf(e))) throw e;
        // A tag that does not verify is CKR_GENERAL_ERROR on some modules (SoftHSM2), as a failing device would be:
        // if a fresh session still finds the key, the wrapped key is the problem, not the store.
        if (NOT_OURS.has(codeOf(e)) || this.reachable()) {
          throw new VaultError(
            `the data key ${keyRowId(binding)} does not unwrap: damaged, or moved from another tenant`,
            'tenant_keys',
            'wrapped_key',
          );
        }
        throw e;
      }
    });
  }

  describe(): KeyStoreDescription {
    return { store: 'pkcs11', kekId: this.kekId() };
  }

  /**
   * Readiness asks often: a session that works and still finds the key answers for the store, and is kept (closing it
   * at every probe would log in again and again on a token other processes share, and meet it busy). Without one, or
   * when it fails, a fresh session decides.
   */
  health(): Promise<'available' | 'unavailable'> {
    if (this.session && !this.stale) {
      try {
        this.module.C_GetSessionInfo(this.session);
        this.findKey(this.session);
        return Promise.resolve('available');
      } catch {
        /* a fresh session decides */
      }
    }
    return Promise.resolve(this.reachable() ? 'available' : 'unavailable');
  }

  /** A fresh session finds the key: the store can serve (a key removed from the token is a store that cannot). */
  private reachable(): boolean {
    try {
      this.drop();
      const { session } = this.connected();
      this.module.C_GetSessionInfo(session);
      return true;
    } catch {
      this.drop();
      this.stale = true;
      return false;
    }
  }

  private kekId(label = this.settings.kekLabel): string {
    return `pkcs11:${label}`;
  }

  private crypt(op: 'encrypt' | 'decrypt', iv: Buffer, binding: KeyBinding, input: Buffer, output: Buffer, label?: string): Buffer {
    const connected = this.connected();
    const session = connected.session;
    const key = label === undefined || label === this.settings.kekLabel ? connected.key : this.findKey(session, label);
    const mechanism = {
      mechanism: this.p11.CKM_AES_GCM,
      parameter: {
        type: this.p11.CK_PARAMS_AES_GCM_v240,
        iv,
        aad: bindingAad(binding),
        ivBits: IV_BYTES * 8,
        tagBits: TAG_BITS,
      },
    };
    if (op === 'encrypt') {
      this.module.C_EncryptInit(session, mechanism, key);
      return this.module.C_Encrypt(session, input, output);
    }
    this.module.C_DecryptInit(session, mechanism, key);
    return this.module.C_Decrypt(session, input, output);
  }

  /** One call to the module; a failure that is not the value's drops the session, so the next call logs in again. */
  private call<T>(op: () => T): Promise<T> {
    try {
      try {
        return Promise.resolve(op());
      } catch (e) {
        if (!STALE_HANDLE.has(codeOf(e))) throw e;
        this.drop();
        if (codeOf(e) === 0x190) [this.stale, this.reinitializedAt] = [true, 0];
        return Promise.resolve(op());
      }
    } catch (e) {
      if (e instanceof VaultError || e instanceof KeyStoreUnavailable) {
        if (e instanceof KeyStoreUnavailable) {
          this.drop();
          this.stale = true;
        }
        return Promise.reject(e);
      }
      this.drop();
      this.stale = true;
      return Promise.reject(new KeyStoreUnavailable(`the PKCS#11 module failed: ${describe(e)}`));
    }
  }

  private connected(): { session: Buffer; key: Buffer } {
    if (!this.session || !this.key) this.connect();
    if (!this.session || !this.key) throw new KeyStoreUnavailable('no session with the token');
    return { session: this.session, key: this.key };
  }

  private connect(): void {
    const m = this.module;
    if (this.stale && Date.now() - this.reinitializedAt >= REINITIALIZE_MS) {
      this.reinitializedAt = Date.now();
      try {
        m.C_Finalize();
      } catch {
        /* not initialized any more */
      }
      try {
        m.C_Initialize();
      } catch (e) {
        if (codeOf(e) !== 0x191 /* CKR_CRYPTOKI_ALREADY_INITIALIZED */) throw e;
      }
      this.stale = false;
    }
    const slot = m.C_GetSlotList(true).find((s) => m.C_GetTokenInfo(s).label.trim() === this.settings.tokenLabel);
    if (!slot) throw new ConfigError('PKCS11_TOKEN_LABEL', `no token labelled "${this.settings.tokenLabel}" in ${this.settings.module}`);
    const session = m.C_OpenSession(slot, this.p11.CKF_SERIAL_SESSION | this.p11.CKF_RW_SESSION);
    try {
      m.C_Login(session, this.p11.CKU_USER, this.settings.pin);
    } catch (e) {
      // Already logged in through another session of this process: fine. A wrong PIN is named, never shown.
      if (codeOf(e) !== 0x100 /* CKR_USER_ALREADY_LOGGED_IN */) {
        m.C_CloseSession(session);
        throw new ConfigError('PKCS11_PIN', `was refused by token "${this.settings.tokenLabel}" (${describe(e)})`);
      }
    }
    const key = this.findKey(session);
    this.session = session;
    this.key = key;
  }

  private findKey(session: Buffer, label = this.settings.kekLabel): Buffer {
    const m = this.module;
    m.C_FindObjectsInit(session, [
      { type: this.p11.CKA_CLASS, value: this.p11.CKO_SECRET_KEY },
      { type: this.p11.CKA_LABEL, value: label },
    ]);
    const found = m.C_FindObjects(session, 2);
    m.C_FindObjectsFinal(session);
    if (found.length !== 1) {
      throw new ConfigError(
        'PKCS11_KEK_LABEL',
        `expected one AES key labelled "${label}" on token "${this.settings.tokenLabel}", found ${found.length}`,
      );
    }
    return found[0];
  }

  private drop(): void {
    if (this.session) {
      try {
        this.module.C_CloseSession(this.session);
      } catch {
        /* the session is gone already */
      }
    }
    this.session = null;
    this.key = null;
  }
}

function codeOf(e: unknown): number {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'number' ? code : -1;
}

/** A module error's name (CKR_...), never a PIN or key material. */
function describe(e: unknown): string {
  return e instanceof Error ? e.message.split('\n')[0].slice(0, 160) : 'unknown error';
}
