import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { BatchedLookup } from '../common/batched-lookup.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { ApiKeyCache } from './api-key-cache.js';
import type { Principal } from './auth.decorators.js';
import { TenantApiKeyEntity } from './tenant-api-key.entity.js';
import { TenantApiKeysRepository, type KeyCandidate } from './tenant-api-keys.repository.js';
import { TenantDirectory } from './tenant-directory.js';
import { sha256 } from '../common/hash.js';

export const TENANT_KEY_PREFIX = 'cwsk_';
/** Characters of the key kept in clear (prefix included) to find the candidate rows. */
const LOOKUP_CHARS = TENANT_KEY_PREFIX.length + 8;

/** A connection's last Authorization header, with its tenant key's hash (hex): see `cachedTenantKey`. */
const PRESENTED = Symbol('cws-connect.presented');
type Connection = object & { [PRESENTED]?: { header: string; hex: string } };

export interface CreatedApiKey {
  id: string;
  key: string;
  name: string | null;
  prefix: string;
  createdAt: Date;
}

@Injectable()
export class ApiKeysService {
  private readonly operatorHash: Buffer;
  /** The lane of clients past their failure bound (AuthThrottle): their lookups share one query at a time. */
  private readonly sharedLookup: BatchedLookup<string, KeyCandidate[]>;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly repo: TenantApiKeysRepository,
    private readonly clock: Clock,
    private readonly cache: ApiKeyCache,
    private readonly tenants: TenantDirectory,
  ) {
    this.operatorHash = sha256(config.operatorApiKey);
    this.sharedLookup = new BatchedLookup(async (prefixes) => {
      const byPrefix = new Map<string, KeyCandidate[]>();
      for (const key of await repo.findLiveByPrefixes(prefixes)) byPrefix.set(key.keyPrefix, [...(byPrefix.get(key.keyPrefix) ?? []), key]);
      return byPrefix;
    });
  }

  /**
   * The credential of a `/v1` call (its Authorization header) checked against the tenant in its path.
   * Tenant isolation lives here, once (API.md section 2): a tenant key on another tenant's path answers
   * 404 tenant_not_found, exactly as if that tenant did not exist; and a tenant that does not exist is
   * 404 tenant_not_found on every tenant-scoped route, for the operator too (API.md section 6). Used by
   * ApiKeyAuthGuard and by the front door (edge/front-door.ts), so no controller repeats it.
   */
  async authorize(authorization: string | undefined, tenantId: string | undefined, shareLookup = false): Promise<Principal> {
    return this.admit(await this.authenticate(bearerOf(authorization), shareLookup), tenantId);
  }

  /**
   * `authorize`'s fast lane, without a promise: the principal of a tenant key whose lookup is cached (ApiKeyCache),
   * on its own tenant's path; null for every other case, which `authorize` decides (a key not cached, the operator,
   * a wrong key, another tenant's path). The key's hash is kept on `connection` (the socket) with the header it came
   * in: a keep-alive connection presents the same header on every call, and hashing it cost a proxied call a
   * measurable share. The cache itself is asked on every call, so a revoked key stops passing as soon as before.
   */
  cachedTenantKey(authorization: string | undefined, tenantId: string, connection: object): Principal | null {
    if (authorization === undefined) return null;
    const known = connection as Connection;
    let presented = known[PRESENTED];
    if (presented === undefined || presented.header !== authorization) {
      const key = bearerOf(authorization);
      if (key === null || !key.startsWith(TENANT_KEY_PREFIX) || key.length <= LOOKUP_CHARS) return null;
      const hash = sha256(key);
      if (timingSafeEqual(hash, this.operatorHash)) return null;
      presented = { header: authorization, hex: hash.toString('hex') };
      known[PRESENTED] = presented;
    }
    const principal = this.cache.get(presented.hex);
    return principal !== undefined && principal.tenantId === tenantId ? principal : null;
  }

  /** The tenant rule alone, for a principal already authenticated (by a key, or by a console session). */
  async admit(principal: Principal, tenantId: string | undefined): Promise<Principal> {
    if (tenantId === undefined) return principal;
    // A tenant key exists only while its tenant does (the delete cascades); the operator may name any id.
    const known = principal.kind === 'tenant' ? tenantId === principal.tenantId : await this.tenants.exists(tenantId);
    if (!known) throw new AppError('tenant_not_found', 'No such tenant.');
    return principal;
  }

  /**
   * The principal of a presented key: the operator key, a cached tenant key and a key already found wrong cost no
   * round trip; any other key is looked up by its prefix, in a query of its own or, with `shareLookup` (a client
   * past its failure bound), in one shared with the other lookups waiting (BatchedLookup): a query per batch.
   */
  async authenticate(presented: string | null, shareLookup = false): Promise<Principal> {
    if (!presented) throw new AppError('unauthorized', 'An API key is required: Authorization: Bearer <key>.');
    const hash = sha256(presented);
    if (timingSafeEqual(hash, this.operatorHash)) return { kind: 'operator' };
    if (presented.startsWith(TENANT_KEY_PREFIX) && presented.length > LOOKUP_CHARS) {
      // Keyed by the hash of a 256-bit random key: a lookup by it reveals nothing a timing attack could use.
      const hashHex = hash.toString('hex');
      const cached = this.cache.get(hashHex);
      if (cached) return cached;
      if (this.cache.isWrong(hashHex)) throw new AppError('unauthorized', 'The API key is not valid.');
      const epoch = this.cache.mark();
      const prefix = presented.slice(0, LOOKUP_CHARS);
      const candidates = shareLookup ? ((await this.sharedLookup.get(prefix)) ?? []) : await this.repo.findLiveByPrefix(prefix);
      for (const candidate of candidates) {
        if (timingSafeEqual(candidate.keyHash, hash)) {
          const principal = { kind: 'tenant' as const, tenantId: candidate.tenantId, keyId: candidate.id };
          this.cache.set(hashHex, principal, epoch);
          return principal;
        }
      }
      this.cache.setWrong(hashHex);
    }
    throw new AppError('unauthorized', 'The API key is not valid.');
  }

  /** 256 random bits; the key is returned once and only its SHA-256 is kept. */
  async create(tenantId: string, name: string | null): Promise<CreatedApiKey> {
    const key = `${TENANT_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
    const entity = Object.assign(new TenantApiKeyEntity(), {
      id: randomUUID(),
      tenantId,
      name,
      keyPrefix: key.slice(0, LOOKUP_CHARS),
      keyHash: sha256(key),
      createdAt: this.clock.now(),
      lastUsedAt: null,
      revokedAt: null,
    });
    await this.repo.insert(entity);
    return { id: entity.id, key, name, prefix: entity.keyPrefix, createdAt: entity.createdAt };
  }

  list(tenantId: string): Promise<TenantApiKeyEntity[]> {
    return this.repo.listForTenant(tenantId);
  }

  async revoke(tenantId: string, id: string): Promise<void> {
    if (!(await this.repo.revoke(tenantId, id, this.clock.now()))) throw new AppError('api_key_not_found', 'No such API key.');
    this.cache.dropKey(id);
  }

  /** Revokes every live key of a tenant being deleted, here and (by the change feed) on every instance. */
  async revokeAllOf(tenantId: string, at: Date): Promise<void> {
    await this.repo.revokeAll(tenantId, at);
    this.cache.dropTenant(tenantId);
  }
}

export function bearerOf(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}
