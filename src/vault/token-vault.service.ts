import { createCipheriv, createDecipheriv, createSecretKey, KeyObject, randomFillSync } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { ContractFailure } from '../common/app-error.js';
import { MetricsService } from '../telemetry/metrics.service.js';

/** Where a value sealed directly with the VAULT_KEYS ring lives (its AAD): check values, wrapped data keys. */
export interface KekRef {
  table: string;
  id: string;
  column: string;
}

/**
 * The owner of a sealed value: it is bound to the ciphertext as AAD, so the value opens only there. `tenantId` is
 * the tenant whose data key seals it (envelope encryption, docs/security.md "Keys"): every caller passes it.
 */
export interface SealedRef extends KekRef {
  tenantId: string;
}

/** Anything with the fields of a tenant's data key (tenant-keys.service.ts); the vault only needs these two. */
interface TenantKeySource {
  readonly envelope: boolean;
  activeKey(tenantId: string): Promise<{ version: number; key: KeyObject }>;
  keyOf(tenantId: string, version: number): Promise<KeyObject>;
  /** The key when held fresh in memory, without a promise (a warm read), else undefined. */
  cachedKeyOf(tenantId: string, version: number): KeyObject | undefined;
}

/**
 * A value that cannot be opened (unknown key, tampered, moved to another owner, malformed) or a ref that
 * cannot be sealed for. Its message names only the table, the column and the key id: never the plaintext,
 * the ciphertext or key material. The module that opened the value answers for it (a connection needs its
 * user again, a receiver or an events secret must be replaced); this answer is only the fallback of a caller
 * that does not.
 */
export class VaultError extends Error implements ContractFailure {
  constructor(
    message: string,
    readonly table: string,
    readonly column: string,
    readonly kid: string | null = null,
    /**
     * The key id is not in this instance's ring but another live instance or the key store knows it: this
     * instance's ring is behind (a key rotation under way), the value itself may be fine, so nothing is marked.
     */
    readonly ringBehind = false,
  ) {
    super(message);
    this.name = 'VaultError';
  }

  get contractAnswer(): { status: number; code: string; message: string } {
    return this.ringBehind
      ? { status: 503, code: 'service_unavailable', message: 'This instance does not hold the key of a stored secret yet; retry.' }
      : {
          status: 500,
          code: 'vault_key_mismatch',
          message: 'A stored secret needed for this call does not open with the configured VAULT_KEYS.',
        };
  }

  /** One line without a stack: the key id and where the value is sealed, never the value (docs/operations.md). */
  logLine(): { fields: Record<string, unknown>; message: string } {
    return { fields: { kid: this.kid, sealed: `${this.table}.${this.column}` }, message: `a stored secret does not open: ${this.message}` };
  }
}

const VERSION = 'v1';
const AAD_PREFIX = 'cws-connect/v1';
/** The envelope format: sealed with the tenant's data key, `v2.<key version>.<iv>.<ciphertext>.<tag>`. */
const ENVELOPE = 'v2';
const ENVELOPE_AAD_PREFIX = 'cws-connect/v2';
const KEY_VERSION = /^[1-9][0-9]{0,8}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** IVs are cut from one random pool: a randomBytes(12) per seal would cost more than the encryption itself. */
const IV_POOL_BYTES = IV_BYTES * 512;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
// The kid is echoed in errors, so it must look like a kid (the VAULT_KEYS format's rule, src/config/value-formats.ts) before it is trusted that far.
const KID = /^[A-Za-z0-9_-]{1,32}$/;

/**
 * AES-256-GCM, in two formats that every release from this one on opens, told apart by their first part:
 * - `v1.<kid>.<iv>.<ciphertext>.<tag>` (base64url parts): sealed with a key of the VAULT_KEYS ring, the kid
 *   selecting the key that opens it, so keys can be rotated without a flag day: add a new key in front of
 *   VAULT_KEYS, roll the instances (a key seals only once every live instance holds it: vault-instances.service.ts),
 *   re-encrypt (`npm run cli -- vault:reencrypt`), then drop the old key. Release 0.2.0 reads only this format.
 * - `v2.<version>.<iv>.<ciphertext>.<tag>`: the envelope format, sealed with version `version` of the owner
 *   tenant's data key (tenant-keys.service.ts), the tenant in the AAD too. New values are sealed so only while
 *   every live instance advertises that it opens it (vault-instances.service.ts), so a 0.2.0 instance running
 *   beside this one during a rolling upgrade never meets one.
 */
@Injectable()
export class TokenVault {
  private readonly keys: ReadonlyMap<string, KeyObject>;
  readonly activeKid: string;
  private readonly ivPool = Buffer.alloc(IV_POOL_BYTES);
  private ivOffset = IV_POOL_BYTES;
  /** The key new values are sealed with: the active key once every live instance can open it (vault-instances.service.ts). */
  private sealing: string;
  /** Key ids that other live instances hold or the key store records (vault-instances.service.ts). */
  private elsewhere: ReadonlySet<string> = new Set();
  private readonly openFailures: Counter<'table' | 'column'> | null;
  private readonly logger = new Logger('TokenVault');
  /** null: a vault built on its own (tests, benches, seeding tools): it seals with the ring only. */
  private tenantKeys: TenantKeySource | null = null;

  constructor(@Inject(APP_CONFIG) config: Pick<AppConfig, 'vaultKeys'>, @Optional() @Inject(MetricsService) metrics?: MetricsService) {
    if (config.vaultKeys.length === 0) throw new Error('the vault needs at least one key');
    this.keys = new Map(config.vaultKeys.map((k) => [k.kid, createSecretKey(k.key)]));
    this.activeKid = config.vaultKeys[0].kid;
    this.sealing = this.activeKid;
    this.openFailures = metrics
      ? new Counter({
          name: 'cws_vault_open_failures_total',
          help: 'Stored secrets that did not open (damaged, restored from another installation, or under a key this instance lacks), by table and column.',
          labelNames: ['table', 'column'],
          registers: [metrics.registry],
        })
      : null;
  }

  /** TenantKeys registers itself here (it needs the ring for the local key store, so the vault cannot inject it). */
  useTenantKeys(keys: TenantKeySource): void {
    this.tenantKeys = keys;
  }

  /**
   * Seals `plaintext` for its owner `ref`: with the tenant's data key while every live instance opens the envelope
   * format, else with the ring's sealing key. Throws AppError('key_store_unavailable') when the tenant's key cannot be
   * had (nothing is sealed then).
   */
  async seal(plaintext: string, ref: SealedRef): Promise<string> {
    if (!this.tenantKeys?.envelope) return this.sealWith(this.sealing, plaintext, ref);
    checkTenant(ref);
    const { version, key } = await this.tenantKeys.activeKey(ref.tenantId);
    return this.encrypt(key, envelopeAad(ref, version), `${ENVELOPE}.${version}`, plaintext);
  }

  /**
   * Loads the key the tenant's next values will be sealed with (a no-op while the ring seals): a caller that must
   * not fail to seal after an irreversible step (a renewal, once the upstream has spent the refresh token) calls
   * it before that step. Throws AppError('key_store_unavailable') like seal.
   */
  async prepareSeal(tenantId: string): Promise<void> {
    if (this.tenantKeys?.envelope) await this.tenantKeys.activeKey(tenantId);
  }

  /** Whether new values are sealed with the tenants' data keys now. */
  get sealsEnvelope(): boolean {
    return this.tenantKeys?.envelope ?? false;
  }

  /** The key id new values are sealed with now. */
  get sealingKid(): string {
    return this.sealing;
  }

  /** The key ids other live instances hold or the key store records: a value under one of them that this ring lacks is not damaged. */
  knownElsewhere(kids: Iterable<string>): void {
    this.elsewhere = new Set(kids);
  }

  /** Seals with `kid` from now on: a key of the ring that every live instance can open. */
  sealWithKey(kid: string): void {
    if (!this.keys.has(kid)) throw new Error(`key "${kid}" is not in VAULT_KEYS`);
    this.sealing = kid;
  }

  /** Seals under a given key of the ring, in the ring's format (the start-up key check, the local key store). */
  sealWith(kid: string, plaintext: string, ref: KekRef): string {
    return this.encrypt(this.key(kid, ref), aad(ref), `${VERSION}.${kid}`, plaintext);
  }

  private encrypt(key: KeyObject, additional: Buffer, head: string, plaintext: string): string {
    const iv = this.nextIv();
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(additional);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [head, b64(iv), b64(ciphertext), b64(cipher.getAuthTag())].join('.');
  }

  /** The key ids of the ring, the active one first. */
  keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /**
   * The plaintext of a sealed value. A value that does not open is counted (cws_vault_open_failures_total)
   * and logged once, here, with the owner's table, column, row id and key id, never the value: it is the
   * owner's problem (that connection, receiver or tenant), not the instance's, so readiness ignores it.
   */
  async open(sealed: string, ref: SealedRef): Promise<string> {
    try {
      const plaintext = sealed.startsWith(`${ENVELOPE}.`) ? this.openEnvelope(sealed, ref) : this.decrypt(sealed, ref);
      return typeof plaintext === 'string' ? plaintext : await plaintext;
    } catch (e) {
      if (e instanceof VaultError) {
        this.openFailures?.inc({ table: ref.table, column: ref.column });
        this.logger.error(
          { sealed: `${ref.table}.${ref.column}`, id: ref.id, kid: e.kid, ringBehind: e.ringBehind },
          `a stored secret does not open: ${e.message}`,
        );
      }
      throw e;
    }
  }

  /** A value sealed with the ring (a wrapped data key): its plaintext, or a VaultError; neither counted nor logged. */
  openKek(sealed: string, ref: KekRef): string {
    return this.decrypt(sealed, ref);
  }

  /** The plaintext, or null when the value does not open; neither counted nor logged (the start-up key check). */
  tryOpen(sealed: string, ref: KekRef): string | null {
    try {
      return this.decrypt(sealed, ref);
    } catch (e) {
      if (e instanceof VaultError) return null;
      throw e;
    }
  }

  /** A string when the tenant's key is cached (no promise on a warm read), else the promise of one. */
  private openEnvelope(sealed: string, ref: SealedRef): string | Promise<string> {
    const parts = sealed.split('.');
    if (parts.length !== 5 || !KEY_VERSION.test(parts[1]) || !parts.slice(2).every((p) => BASE64URL.test(p))) {
      throw new VaultError(`the sealed value in ${ref.table}.${ref.column} is malformed`, ref.table, ref.column);
    }
    if (!this.tenantKeys) {
      throw new VaultError(
        `the sealed value in ${ref.table}.${ref.column} is under a tenant data key, which this vault cannot reach`,
        ref.table,
        ref.column,
      );
    }
    checkTenant(ref);
    const version = Number(parts[1]);
    const decipher = (key: KeyObject): string =>
      this.decipher(key, envelopeAad(ref, version), parts[2], parts[3], parts[4], ref, `tenant/${version}`);
    const cached = this.tenantKeys.cachedKeyOf(ref.tenantId, version);
    if (cached) return decipher(cached);
    return this.tenantKeys.keyOf(ref.tenantId, version).then(decipher, (e: unknown) => {
      if (e instanceof VaultError) {
        throw new VaultError(
          `the sealed value in ${ref.table}.${ref.column} does not open: ${e.message}`,
          ref.table,
          ref.column,
          `tenant/${version}`,
        );
      }
      throw e;
    });
  }

  private decrypt(sealed: string, ref: KekRef): string {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== VERSION || !KID.test(parts[1]) || !parts.slice(2).every((p) => BASE64URL.test(p))) {
      throw new VaultError(`the sealed value in ${ref.table}.${ref.column} is malformed`, ref.table, ref.column);
    }
    const [, kid, ivText, ciphertextText, tagText] = parts;
    return this.decipher(this.key(kid, ref), aad(ref), ivText, ciphertextText, tagText, ref, kid);
  }

  private decipher(
    key: KeyObject,
    additional: Buffer,
    ivText: string,
    ciphertextText: string,
    tagText: string,
    ref: KekRef,
    kid: string,
  ): string {
    const iv = Buffer.from(ivText, 'base64url');
    const tag = Buffer.from(tagText, 'base64url');
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
      throw new VaultError(`the sealed value in ${ref.table}.${ref.column} (key "${kid}") is malformed`, ref.table, ref.column, kid);
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(additional);
      decipher.setAuthTag(tag);
      const plaintext = Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]).toString('utf8');
      return plaintext;
    } catch {
      // Deliberately without the cause: a wrong key, a tampered value and a value moved from another row
      // are indistinguishable by design, and nothing about the value itself belongs in an error.
      throw new VaultError(
        `the sealed value in ${ref.table}.${ref.column} (key "${kid}") does not open: tampered, or moved from another row or column`,
        ref.table,
        ref.column,
        kid,
      );
    }
  }

  /** Sealed under the active key, so re-encryption has nothing to do for it. */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(`${VERSION}.${this.activeKid}.`);
  }

  /**
   * 96 fresh random bits for one seal: a slice of a pool refilled from the CSPRNG once it is used up, never
   * handed out twice (a repeated IV under one GCM key would expose the key's authentication). Copied out,
   * so the pool's next refill cannot change an IV already in use.
   */
  private nextIv(): Buffer {
    if (this.ivOffset + IV_BYTES > IV_POOL_BYTES) {
      randomFillSync(this.ivPool);
      this.ivOffset = 0;
    }
    const iv = Buffer.from(this.ivPool.subarray(this.ivOffset, this.ivOffset + IV_BYTES));
    this.ivOffset += IV_BYTES;
    return iv;
  }

  private key(kid: string, ref: KekRef): KeyObject {
    const key = this.keys.get(kid);
    if (!key) {
      throw new VaultError(
        `the sealed value in ${ref.table}.${ref.column} is under key "${kid}", which is not in VAULT_KEYS`,
        ref.table,
        ref.column,
        kid,
        this.elsewhere.has(kid),
      );
    }
    return key;
  }
}

function aad(ref: KekRef): Buffer {
  checkOwner(ref);
  return Buffer.from(`${AAD_PREFIX}\0${ref.table}\0${ref.id}\0${ref.column}`, 'utf8');
}

function checkOwner(ref: KekRef): void {
  // NUL separates the fields, so no field may hold one: otherwise two different refs could encode alike.
  if (!fieldOk(ref.table) || !fieldOk(ref.id) || !fieldOk(ref.column)) {
    throw new VaultError(
      `invalid owner reference for ${ref.table.replace(/\0/g, '')}.${ref.column.replace(/\0/g, '')}`,
      ref.table,
      ref.column,
    );
  }
}

function fieldOk(f: string): boolean {
  return f.length > 0 && !f.includes('\0');
}

/** The envelope format's AAD: the tenant, the owner row and the key version, NUL separated (aad's rule). */
function envelopeAad(ref: SealedRef, version: number): Buffer {
  checkOwner(ref);
  return Buffer.from(`${ENVELOPE_AAD_PREFIX}\0${ref.tenantId}\0${ref.table}\0${ref.id}\0${ref.column}\0${version}`, 'utf8');
}

function checkTenant(ref: SealedRef): void {
  if (typeof ref.tenantId !== 'string' || ref.tenantId.length === 0 || ref.tenantId.includes('\0') || ref.tenantId.includes('/')) {
    throw new VaultError(`invalid tenant for ${ref.table}.${ref.column}`, ref.table, ref.column);
  }
}

function b64(buf: Buffer): string {
  return buf.toString('base64url');
}
