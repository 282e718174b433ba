// What tenant keys cost a read (docs/keys.md), measured in this process against today's direct key in the same run.
//   npx tsx bench/vault.ts
// Env: BENCH_ROUNDS (9), BENCH_OPS (200000), BENCH_TENANTS (1000), BENCH_READS (100000).
// Three figures, no database (the tenant_keys rows live in memory here: what is measured is the vault, not SQL):
// 1. CPU per open of a warm value: sealed with the tenant's data key (cached) against sealed with the VAULT_KEYS ring
//    (the floor, today's path), in alternating rounds; the ratio of the medians. Goal (issue 44): <= 1.02.
// 2. Key store unwraps per BENCH_READS reads spread over BENCH_TENANTS tenants, KEY_CACHE_TTL 5m. Goal: <= 1,000.
// 3. Cold start: the time to unwrap BENCH_TENANTS tenants' keys for the first time (KEY_STORE=local). Stated.
// Not part of `npm test`.
import { randomBytes } from 'node:crypto';
import { LocalKeyStore } from '../src/vault/local-key-store.js';
import type { KeyBinding, KeyStore, WrappedKey } from '../src/vault/key-store.js';
import { TenantKeys } from '../src/vault/tenant-keys.service.js';
import { type SealedRef, TokenVault } from '../src/vault/token-vault.service.js';
import { median } from './harness.js';
import { MemoryTenantKeys } from '../test/support/memory-tenant-keys.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const OPS = Number(process.env.BENCH_OPS ?? 200_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 1000);
const READS = Number(process.env.BENCH_READS ?? 100_000);

/** Counts the unwraps that reach the store. */
class CountingStore implements KeyStore {
  readonly kind = 'local' as const;
  unwraps = 0;
  constructor(private readonly inner: KeyStore) {}
  wrap(dataKey: Buffer, binding: KeyBinding): Promise<WrappedKey> {
    return this.inner.wrap(dataKey, binding);
  }
  ownKek(kek: string): Promise<string> {
    return this.inner.ownKek(kek);
  }
  unwrap(wrapped: WrappedKey, binding: KeyBinding): Promise<Buffer> {
    this.unwraps++;
    return this.inner.unwrap(wrapped, binding);
  }
  describe() {
    return this.inner.describe();
  }
  health() {
    return this.inner.health();
  }
}

function setup(): { vault: TokenVault; keys: TenantKeys; store: CountingStore } {
  const vault = new TokenVault({ vaultKeys: [{ kid: 'bench', key: randomBytes(32) }] });
  const store = new CountingStore(new LocalKeyStore(vault));
  const keys = new TenantKeys(
    { keys: { store: 'local', pkcs11: null, transit: null, cacheTtlMs: 5 * 60_000, cacheGraceMs: 10 * 60_000 } },
    store,
    new MemoryTenantKeys().asRepository(),
    vault,
  );
  return { vault, keys, store };
}

async function cpuPerOp(run: () => Promise<void>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / OPS; // ns per op
}

async function main(): Promise<void> {
  const { vault, keys, store } = setup();
  const ref: SealedRef = { table: 'connections', id: 'c-1', column: 'access_token_enc', tenantId: 'acme' };
  const token = `at_${randomBytes(24).toString('base64url')}`;
  keys.envelope = false;
  const direct = await vault.seal(token, ref);
  keys.envelope = true;
  const envelope = await vault.seal(token, ref);
  if (!direct.startsWith('v1.') || !envelope.startsWith('v2.')) throw new Error('formats not as expected');

  // 1. Warm opens, alternating rounds.
  const floor: number[] = [];
  const tenantKeyed: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    floor.push(
      await cpuPerOp(async () => {
        for (let i = 0; i < OPS; i++) await vault.open(direct, ref);
      }),
    );
    tenantKeyed.push(
      await cpuPerOp(async () => {
        for (let i = 0; i < OPS; i++) await vault.open(envelope, ref);
      }),
    );
  }
  const [f, t] = [median(floor), median(tenantKeyed)];
  console.log(
    `warm open: ${(t / 1000).toFixed(2)} µs with the tenant's data key against ${(f / 1000).toFixed(2)} µs with the ring: ${(t / f).toFixed(3)}×`,
  );

  // 2 and 3. Many tenants: their first seal creates their keys; then the cache is dropped and the reads begin cold.
  const sealed: Array<{ value: string; ref: SealedRef }> = [];
  for (let i = 0; i < TENANTS; i++) {
    const r: SealedRef = { table: 'connections', id: `c-${i}`, column: 'access_token_enc', tenantId: `t${i}` };
    sealed.push({ value: await vault.seal(token, r), ref: r });
  }
  for (let i = 0; i < TENANTS; i++) keys.forget(`t${i}`);
  store.unwraps = 0;
  const coldStart = performance.now();
  for (const s of sealed) await vault.open(s.value, s.ref);
  const coldMs = performance.now() - coldStart;
  for (let i = TENANTS; i < READS; i++) {
    const s = sealed[Math.floor(Math.random() * sealed.length)];
    await vault.open(s.value, s.ref);
  }
  console.log(`unwraps for ${READS} reads over ${TENANTS} tenants: ${store.unwraps} (goal <= ${TENANTS})`);
  console.log(
    `cold start of ${TENANTS} tenants' keys (local store, no database): ${coldMs.toFixed(0)} ms, ${((coldMs * 1000) / TENANTS).toFixed(0)} µs a tenant`,
  );
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
