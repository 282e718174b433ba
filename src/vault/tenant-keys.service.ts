import { createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { AppError } from '../common/app-error.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { MetricsService } from '../telemetry/metrics.service.js';
import { KEY_STORE, type KeyBinding, type KeyStore, KeyStoreUnavailable, keyRowId } from './key-store.js';
import { type TenantKeyRow, TenantKeysRepository } from './tenant-keys.repository.js';
import { TokenVault, VaultError } from './token-vault.service.js';

/** A key store call that has not answered by then counts as unreachable: a caller gets its 503 quickly, never a hang. */
export const KEY_STORE_TIMEOUT_MS = 1000;
/** After the store failed, calls do not try it again for this long (each would wait KEY_STORE_TIMEOUT_MS otherwise). */
const STORE_RETRY_MS = 1000;
/** What a caller is told to wait while the key store is unreachable (Retry-After, seconds). */
export const KEY_STORE_RETRY_AFTER_SECONDS = 5;

interface CachedKey {
  key: KeyObject;
  /** When it was unwrapped (ms). */
  at: number;
  /** When it is unwrapped again: KEY_CACHE_TTL after `at`, minus up to 10% so that keys cached together do not all expire together. */
  freshUntil: number;
  /** From then on a read starts the next unwrap in the background (the last 10% of its life): readers never wait for it. */
  refreshFrom: number;
}

interface ActiveVersion {
  version: number;
  at: number;
  freshUntil: number;
}

export interface DataKey {
  version: number;
  key: KeyObject;
}

/**
 * Each tenant's data key (envelope encryption): created on the tenant's first seal, stored only wrapped by the key
 * store's KEK (tenant_keys), unwrapped on demand and kept in memory for KEY_CACHE_TTL (unwrapped again in the
 * background during its last tenth, so a read never waits for a refresh). While the store is
 * unreachable a cached key keeps serving until KEY_CACHE_GRACE past its TTL; a tenant without one gets
 * `503 key_store_unavailable` (Retry-After) at once, and nothing is sealed half way. Concurrent misses of one key
 * share one unwrap.
 */
@Injectable()
export class TenantKeys {
  private readonly logger = new Logger(TenantKeys.name);
  private readonly keys = new Map<string, CachedKey>();
  private readonly active = new Map<string, ActiveVersion>();
  private readonly loading = new Map<string, Promise<CachedKey>>();
  /** Set by the heartbeat (vault-instances.service.ts): every live instance opens the envelope format. */
  private envelopeOn = false;
  private envelopeDecided = false;
  private storeDownUntil = 0;
  private lastStoreState: 'available' | 'unavailable' = 'available';
  private readonly unwraps: Counter<'store'> | null;
  private readonly now = Date.now;
  /**
   * Moves on whenever what is cached may have been revoked (a tenant's change heard, `forget`): an unwrap started
   * before does not cache what it read, so a key read just before its destruction cannot outlive the news of it.
   */
  private epoch = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'keys'>,
    @Inject(KEY_STORE) readonly store: KeyStore,
    @Inject(TenantKeysRepository) private readonly repo: TenantKeysRepository,
    @Inject(TokenVault) vault: TokenVault,
    @Optional() @Inject(MetricsService) metrics?: MetricsService,
  ) {
    this.unwraps = metrics
      ? new Counter({
          name: 'cws_key_store_unwraps_total',
          help: 'Tenant data keys unwrapped through the key store (cache misses and refreshes), by key store.',
          labelNames: ['store'],
          registers: [metrics.registry],
        })
      : null;
    if (metrics) {
      const keys = this.keys;
      new Gauge({
        name: 'cws_tenant_keys_cached',
        help: "Tenant data keys this instance holds unwrapped in memory (a deleted tenant's are dropped within a second or two).",
        registers: [metrics.registry],
        collect() {
          this.set(keys.size);
        },
      });
    }
    vault.useTenantKeys(this);
  }

  /** Whether new values are sealed in the envelope format (every live instance can open it). */
  get envelope(): boolean {
    return this.envelopeOn;
  }

  set envelope(on: boolean) {
    // The first decision is the state of every start (quiet on a terminal); a change after it is news: the last
    // instance of an older release left, or one joined.
    if (on !== this.envelopeOn || !this.envelopeDecided) {
      const message = `vault: new secrets are sealed ${on ? "with each tenant's data key" : 'with the VAULT_KEYS ring'}`;
      if (this.envelopeDecided) this.logger.log(message);
      else this.logger.debug(message);
    }
    this.envelopeDecided = true;
    this.envelopeOn = on;
  }

  /** The key store's state as this instance last saw it (readiness). */
  get storeState(): 'available' | 'unavailable' {
    return this.lastStoreState;
  }

  /** The key new values of the tenant are sealed with: its newest version, created on first use. */
  async activeKey(tenantId: string): Promise<DataKey> {
    const now = this.now();
    const cached = this.active.get(tenantId);
    if (cached && now < cached.freshUntil) return { version: cached.version, key: await this.keyOf(tenantId, cached.version) };
    let row: TenantKeyRow | null;
    try {
      row = await this.repo.newest(tenantId);
      if (!row || row.wrapped === null) row = await this.create(tenantId, (row?.version ?? 0) + 1);
    } catch (e) {
      if (!(e instanceof KeyStoreUnavailable)) throw e;
      if (cached && now < cached.at + this.config.keys.cacheTtlMs + this.config.keys.cacheGraceMs) {
        return { version: cached.version, key: await this.keyOf(tenantId, cached.version) };
      }
      throw unavailable();
    }
    this.active.set(tenantId, { version: row.version, at: now, freshUntil: this.freshUntil(now) });
    return { version: row.version, key: await this.keyOf(tenantId, row.version, row) };
  }

  /**
   * The key of version `version` when this instance holds it fresh, without waiting for anything (a warm read's
   * path: no promise); during its last tenth the next unwrap starts in the background. Undefined otherwise.
   */
  cachedKeyOf(tenantId: string, version: number): KeyObject | undefined {
    const id = keyRowId({ tenantId, version });
    const cached = this.keys.get(id);
    if (!cached) return undefined;
    const now = this.now();
    if (now >= cached.freshUntil) return undefined;
    if (now >= cached.refreshFrom && !this.loading.has(id)) void this.load(id, { tenantId, version }).catch(() => undefined);
    return cached.key;
  }

  /** The key of version `version` of the tenant's data key (an old version still opens what it sealed). */
  async keyOf(tenantId: string, version: number, row?: TenantKeyRow): Promise<KeyObject> {
    const fresh = this.cachedKeyOf(tenantId, version);
    if (fresh) return fresh;
    const id = keyRowId({ tenantId, version });
    const cached = this.keys.get(id);
    const now = this.now();
    try {
      return (await this.load(id, { tenantId, version }, row)).key;
    } catch (e) {
      if (!(e instanceof KeyStoreUnavailable)) throw e;
      if (cached && now < cached.at + this.config.keys.cacheTtlMs + this.config.keys.cacheGraceMs) return cached.key;
      throw unavailable();
    }
  }

  /**
   * Destroys every data key of the tenant (its deletion): the wrapped keys are erased, so nothing sealed under them
   * opens again, here or from any copy of the database taken afterwards. Returns how many versions were destroyed.
   */
  async destroy(tenantId: string): Promise<number> {
    const n = await this.repo.destroyAll(tenantId);
    this.forget(tenantId);
    return n;
  }

  /** Drops what this instance holds of the tenant's keys (after a destroy or a rotation). */
  forget(tenantId: string): void {
    this.epoch++;
    this.active.delete(tenantId);
    for (const id of this.keys.keys()) if (id.startsWith(`${tenantId}/`)) this.keys.delete(id);
  }

  /** Whether this instance holds any key of the tenant now. */
  holds(tenantId: string): boolean {
    for (const id of this.keys.keys()) if (id.startsWith(`${tenantId}/`)) return true;
    return false;
  }

  /**
   * Another instance may have destroyed keys this one holds (the tenant's deletion, a retired version): drops every
   * held key whose row is destroyed now, with the whole tenant's, and tells how many tenants were dropped.
   * `tenantId`: only that tenant's keys (a change of that tenant was heard); none: every key held (the change
   * feed's fallback poll). Unwraps in flight when it starts cache nothing.
   */
  async dropDestroyed(tenantId?: string): Promise<number> {
    this.epoch++;
    const ids = [...this.keys.keys()].filter((id) => tenantId === undefined || id.startsWith(`${tenantId}/`));
    const tenants = new Set<string>();
    for (const id of await this.repo.destroyedAmong(ids)) tenants.add(id.slice(0, id.lastIndexOf('/')));
    for (const t of tenants) this.forget(t);
    return tenants.size;
  }

  /** A new version of the tenant's data key (keys rotate): new values are sealed with it from now on. */
  async rotate(tenantId: string): Promise<number> {
    const newest = await this.repo.newest(tenantId);
    const row = await this.create(tenantId, (newest?.version ?? 0) + 1);
    this.forget(tenantId);
    return row.version;
  }

  private async create(tenantId: string, version: number): Promise<TenantKeyRow> {
    const binding = { tenantId, version };
    // A tenant with a KEK of its own (keys set-kek) has every version wrapped by it.
    const kek = (await this.repo.kekOf(tenantId)) ?? undefined;
    const dataKey = randomBytes(32);
    const epoch = this.epoch;
    try {
      const wrapped = await this.call(() => this.store.wrap(dataKey, binding, kek));
      if (await this.repo.insert(tenantId, version, wrapped.wrapped, wrapped.kekId)) {
        this.remember(keyRowId(binding), createSecretKey(dataKey), epoch);
      }
    } finally {
      dataKey.fill(0);
    }
    // Another instance may have created this version first: its key is the one.
    const row = await this.repo.find(tenantId, version);
    if (!row) throw new VaultError(`tenant "${tenantId}" is deleted: no data key is made for it`, 'tenant_keys', 'wrapped_key');
    return row;
  }

  private load(id: string, binding: KeyBinding, known?: TenantKeyRow): Promise<CachedKey> {
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.unwrap(binding, known).finally(() => this.loading.delete(id));
      this.loading.set(id, pending);
    }
    return pending;
  }

  private async unwrap(binding: KeyBinding, known?: TenantKeyRow): Promise<CachedKey> {
    const id = keyRowId(binding);
    const epoch = this.epoch;
    const row = known ?? (await this.repo.find(binding.tenantId, binding.version));
    if (!row) throw new VaultError(`the tenant data key ${id} does not exist`, 'tenant_keys', 'wrapped_key');
    if (row.wrapped === null) throw new VaultError(`the tenant data key ${id} was destroyed`, 'tenant_keys', 'wrapped_key');
    const wrapped = row.wrapped;
    const bytes = await this.call(() => this.store.unwrap({ wrapped, kekId: row.kekId }, binding));
    this.unwraps?.inc({ store: this.store.kind });
    try {
      return this.remember(id, createSecretKey(bytes), epoch);
    } finally {
      bytes.fill(0);
    }
  }

  /** Caches the key, unless something may have been revoked since `epoch` (the caller still uses it, once). */
  private remember(id: string, key: KeyObject, epoch: number): CachedKey {
    const at = this.now();
    const freshUntil = this.freshUntil(at);
    const entry = { key, at, freshUntil, refreshFrom: freshUntil - Math.floor(this.config.keys.cacheTtlMs * 0.1) };
    if (epoch === this.epoch) this.keys.set(id, entry);
    return entry;
  }

  private freshUntil(at: number): number {
    const ttl = this.config.keys.cacheTtlMs;
    return at + ttl - Math.floor(Math.random() * ttl * 0.1);
  }

  /** One key store call, bounded by KEY_STORE_TIMEOUT_MS; a failure keeps the store marked down for STORE_RETRY_MS. */
  private async call<T>(op: () => Promise<T>): Promise<T> {
    if (this.now() < this.storeDownUntil) throw new KeyStoreUnavailable('the key store was unreachable moments ago');
    let timer: NodeJS.Timeout | undefined;
    try {
      const result = await Promise.race([
        op(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new KeyStoreUnavailable(`the key store did not answer within ${KEY_STORE_TIMEOUT_MS} ms`)),
            KEY_STORE_TIMEOUT_MS,
          );
          timer.unref();
        }),
      ]);
      this.markStore('available');
      return result;
    } catch (e) {
      if (e instanceof KeyStoreUnavailable) {
        this.storeDownUntil = this.now() + STORE_RETRY_MS;
        this.markStore('unavailable', e.message);
      }
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  private markStore(state: 'available' | 'unavailable', reason?: string): void {
    if (state === this.lastStoreState) return;
    this.lastStoreState = state;
    if (state === 'unavailable') {
      this.logger.error(
        { store: this.store.kind, reason },
        'the key store is unreachable: tenants whose data key is cached keep working for KEY_CACHE_GRACE, others get 503 key_store_unavailable',
      );
    } else {
      this.logger.log({ store: this.store.kind }, 'the key store answers again');
    }
  }

  /** A readiness probe: asks the store itself, and updates the state the instance reports. */
  async probe(): Promise<'available' | 'unavailable'> {
    const state = await Promise.race([
      this.store.health(),
      new Promise<'unavailable'>((resolve) => setTimeout(() => resolve('unavailable'), KEY_STORE_TIMEOUT_MS).unref()),
    ]);
    this.markStore(state, state === 'unavailable' ? 'the readiness probe got no answer' : undefined);
    if (state === 'available') this.storeDownUntil = 0;
    return state;
  }
}

function unavailable(): AppError {
  return new AppError(
    'key_store_unavailable',
    "The key store holding this tenant's key is unreachable; retry shortly.",
    undefined,
    KEY_STORE_RETRY_AFTER_SECONDS,
  );
}
