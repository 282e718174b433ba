import { estimatedBits, vaultKeyRing } from './value-formats.js';
import { optional, variable } from './variable.js';
import { duration, httpUrl, int, oneOf, parsedBy, text } from './variable-types.js';

// The secrets (docs/keys.md, docs/security.md): the token vault's key ring, where the key-encryption key lives (the
// local ring, a PKCS#11 token or a Transit engine) and how long unwrapped data keys are kept, and the operator
// credential. Outside production, an unset VAULT_KEYS or OPERATOR_API_KEY is generated once (local-data.ts).

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** Read at every start. */
export const SECRET_VARIABLES = {
  VAULT_KEYS: optional(
    'secrets',
    parsedBy(vaultKeyRing),
    'key ring for the token vault: `kid:base64(32 bytes)` entries separated by commas; the first is the active key, the others only decrypt',
    {
      defaultText: 'unset: a key is generated once, stored under `$DATA_DIR`, and a warning is logged',
      production: '**required**: no start without it',
      productionCheck: (keys) => (keys ? null : 'is required when NODE_ENV=production (kid:base64 of 32 bytes, comma separated)'),
    },
  ),
  VAULT_HEARTBEAT_MS: variable(
    'secrets',
    int(100, MINUTE),
    5000,
    "how often an instance records the vault key ids it holds and re-reads the others' (a key seals only once every live instance holds it; an instance unseen for 3 beats is gone), ms",
  ),
  KEY_STORE: variable(
    'secrets',
    oneOf(['local', 'pkcs11', 'transit'] as const),
    'local',
    "where the key-encryption key (KEK) that wraps each tenant's data key lives: `local` (the `VAULT_KEYS` ring), `pkcs11` (a PKCS#11 module: an HSM, SoftHSM2) or `transit` (a HashiCorp Vault / OpenBao Transit secrets engine); docs/keys.md",
  ),
  PKCS11_MODULE: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the path of the PKCS#11 module (a `.so`)', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_TOKEN_LABEL: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the label of the token holding the KEK', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_PIN: optional('secrets', text(), "with `KEY_STORE=pkcs11`: the token's user PIN (a secret: never logged)", {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  PKCS11_KEK_LABEL: optional('secrets', text(), 'with `KEY_STORE=pkcs11`: the label of the AES key on the token that wraps the data keys', {
    defaultText: 'unset (required with `pkcs11`)',
  }),
  TRANSIT_ADDR: optional('secrets', httpUrl(), 'with `KEY_STORE=transit`: the Vault / OpenBao server (`https://vault.internal:8200`)', {
    defaultText: 'unset (required with `transit`)',
  }),
  TRANSIT_TOKEN: optional('secrets', text(), 'with `KEY_STORE=transit`: the token sent as `X-Vault-Token` (a secret: never logged)', {
    defaultText: 'unset (required with `transit`)',
  }),
  TRANSIT_KEY_NAME: optional(
    'secrets',
    text(),
    'with `KEY_STORE=transit`: the Transit key (type `aes256-gcm96`) that wraps the data keys',
    {
      defaultText: 'unset (required with `transit`)',
    },
  ),
  TRANSIT_MOUNT: variable('secrets', text(), 'transit', "with `KEY_STORE=transit`: the Transit secrets engine's mount path"),
  TRANSIT_NAMESPACE: optional('secrets', text(), 'with `KEY_STORE=transit`: the namespace sent as `X-Vault-Namespace`', {
    defaultText: 'unset: none sent',
  }),
  TRANSIT_CA_FILE: optional('secrets', text(), 'with `KEY_STORE=transit`: a PEM file of the CA certificates trusted for `TRANSIT_ADDR`', {
    defaultText: "unset: the system's CAs",
  }),
  KEY_CACHE_TTL: variable(
    'secrets',
    duration(1000, 24 * HOUR),
    5 * MINUTE,
    "how long an unwrapped tenant data key is kept in an instance's memory before it is unwrapped again (`30s`, `5m`, `1h`)",
    { defaultText: '`5m`' },
  ),
  KEY_CACHE_GRACE: variable(
    'secrets',
    duration(0, 7 * 24 * HOUR),
    10 * MINUTE,
    'how long past `KEY_CACHE_TTL` a cached data key may still serve while the key store is unreachable',
    { defaultText: '`10m`' },
  ),
  // 128 bits: e.g. 22 random base64url characters, or 32 hex digits.
  OPERATOR_API_KEY: optional('secrets', text(32), 'the operator credential (manages tenants and keys), at least 32 characters', {
    defaultText: 'unset: generated once, stored under `$DATA_DIR`, printed at startup',
    production: '**required**, and at least 128 bits strong (`openssl rand -base64 32`)',
    productionCheck: (key) =>
      !key
        ? 'is required when NODE_ENV=production'
        : estimatedBits(key) < 128
          ? 'is weaker than 128 bits in production: use `openssl rand -base64 32` or longer'
          : null,
  }),
} as const;
