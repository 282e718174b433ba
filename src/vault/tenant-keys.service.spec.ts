import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { KeyBinding, KeyStore, WrappedKey } from './key-store.js';
import { LocalKeyStore } from './local-key-store.js';
import { TenantKeys } from './tenant-keys.service.js';
import { type SealedRef, TokenVault } from './token-vault.service.js';
import { MemoryTenantKeys } from '../../test/support/memory-tenant-keys.js';

const TTL = 10 * 60_000;

/** The local store, counting its unwraps; `hold()` keeps the next unwraps waiting until released. */
class GatedStore implements KeyStore {
  readonly kind = 'local' as const;
  unwraps = 0;
  private gate: Promise<void> | null = null;
  private open: (() => void) | null = null;
  constructor(private readonly inner: KeyStore) {}
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  release(): void {
    this.open?.();
    this.gate = null;
  }
  wrap(dataKey: Buffer, binding: KeyBinding): Promise<WrappedKey> {
    return this.inner.wrap(dataKey, binding);
  }
  ownKek(kek: string): Promise<string> {
    return this.inner.ownKek(kek);
  }
  async unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer> {
    this.unwraps++;
    if (this.gate) await this.gate;
    return this.inner.unwrap(wrapped, binding);
  }
  describe() {
    return this.inner.describe();
  }
  health() {
    return this.inner.health();
  }
}

/** Lets the promises started so far settle (fake timers leave microtasks and setImmediate real). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('TenantKeys: the data key cache (KEY_CACHE_TTL)', () => {
  const start = Date.parse('2026-11-29T00:00:00Z');
  let vault: TokenVault;
  let store: GatedStore;
  let keys: TenantKeys;

  beforeEach(() => {
    jest.useFakeTimers({ now: start, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    vault = new TokenVault({ vaultKeys: [{ kid: 'k1', key: randomBytes(32) }] });
    store = new GatedStore(new LocalKeyStore(vault));
    keys = new TenantKeys(
      { keys: { store: 'local', pkcs11: null, transit: null, cacheTtlMs: TTL, cacheGraceMs: TTL } },
      store,
      new MemoryTenantKeys().asRepository(),
      vault,
    );
    keys.envelope = true;
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  /** A value of the tenant sealed with its data key, and the key dropped from memory: the next open unwraps. */
  async function sealedCold(tenantId: string): Promise<{ value: string; ref: SealedRef }> {
    const ref: SealedRef = { table: 'connections', id: `c-${tenantId}`, column: 'access_token_enc', tenantId };
    const value = await vault.seal(`token of ${tenantId}`, ref);
    expect(value.startsWith('v2.')).toBe(true);
    keys.forget(tenantId);
    return { value, ref };
  }

  it("unwraps a key again in the background during its last tenth: the read does not wait for it, and the new key serves past the old one's end", async () => {
    const { value, ref } = await sealedCold('acme');
    store.unwraps = 0;
    expect(await vault.open(value, ref)).toBe('token of acme');
    expect(store.unwraps).toBe(1);

    // Before the last tenth (it starts between 0.8 and 0.9 of the TTL: expiries are staggered): nothing is unwrapped.
    jest.setSystemTime(start + 0.75 * TTL);
    expect(await vault.open(value, ref)).toBe('token of acme');
    expect(store.unwraps).toBe(1);

    // In the last tenth, with the store slow: the read is served from memory, and one unwrap starts behind it.
    jest.setSystemTime(start + 0.9 * TTL);
    store.hold();
    expect(await vault.open(value, ref)).toBe('token of acme');
    expect(await vault.open(value, ref)).toBe('token of acme');
    expect(store.unwraps).toBe(2);
    store.release();
    await settle();

    // Past the first key's end, the refreshed one serves: no read has waited, no unwrap more.
    jest.setSystemTime(start + 1.5 * TTL);
    expect(await vault.open(value, ref)).toBe('token of acme');
    expect(store.unwraps).toBe(2);
  });

  it('keys cached at the same moment do not all refresh at once: their last tenths are staggered', async () => {
    const tenants = Array.from({ length: 50 }, (_, i) => `t${i}`);
    const values = [];
    for (const t of tenants) values.push(await sealedCold(t));
    for (const { value, ref } of values) await vault.open(value, ref);
    store.unwraps = 0;
    // Each key's last tenth starts somewhere between 0.8 and 0.9 of the TTL: at 0.85, some have begun and some not.
    jest.setSystemTime(start + 0.85 * TTL);
    for (const { value, ref } of values) await vault.open(value, ref);
    await settle();
    expect(store.unwraps).toBeGreaterThan(0);
    expect(store.unwraps).toBeLessThan(tenants.length);
  });
});
