import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import type { KeyStore } from '../src/vault/key-store.js';
import { LocalKeyStore } from '../src/vault/local-key-store.js';
import { Pkcs11KeyStore } from '../src/vault/pkcs11-key-store.js';
import { TenantKeys } from '../src/vault/tenant-keys.service.js';
import { TenantKeysRepository } from '../src/vault/tenant-keys.repository.js';
import { TokenVault, VaultError } from '../src/vault/token-vault.service.js';
import { createSoftHsmToken, SOFTHSM_MODULE, type SoftHsmToken } from './support/softhsm.js';
import { createTestDatabase, openPool } from './support/test-database.js';

/** What TypeORM's DataSource.query answers: the rows, or [rows, count] for an UPDATE or a DELETE. */
async function typeormLike(db: pg.Pool, sql: string, params?: unknown[]): Promise<unknown> {
  const r = await db.query(sql, params);
  return r.command === 'UPDATE' || r.command === 'DELETE' ? [r.rows, r.rowCount] : r.rows;
}

/** A key store, and the same store after its KEK was rotated (a new active KEK; the previous one still on hand). */
interface Subject {
  store: KeyStore;
  rotated: KeyStore;
}

let token: SoftHsmToken;

const SUBJECTS: Record<string, () => Promise<Subject>> = {
  local: () => {
    const k1 = { kid: 'k1', key: randomBytes(32) };
    const k2 = { kid: 'k2', key: randomBytes(32) };
    return Promise.resolve({
      store: new LocalKeyStore(new TokenVault({ vaultKeys: [k1] })),
      rotated: new LocalKeyStore(new TokenVault({ vaultKeys: [k2, k1] })),
    });
  },
  pkcs11: async () => {
    // In this process: jest gives tests a copy of process.env, so SOFTHSM2_CONF cannot reach the C library here.
    const label = `cws-test-${randomBytes(4).toString('hex')}`;
    token = createSoftHsmToken(label, 'cws-kek', ['cws-kek-2'], 'system token directory');
    const settings = { module: SOFTHSM_MODULE, tokenLabel: label, pin: token.pin, kekLabel: 'cws-kek' };
    return { store: await Pkcs11KeyStore.open(settings), rotated: await Pkcs11KeyStore.open({ ...settings, kekLabel: 'cws-kek-2' }) };
  },
};

/**
 * Issue 44: one suite for every key store, over the real PostgreSQL for the tenants' key rows and, for pkcs11, a
 * SoftHSM2 token made by the test setup: round trip, a wrong binding refused, a KEK rotation, a retired data key
 * version still opening, a destroyed key never opening.
 */
describe.each(Object.keys(SUBJECTS))('key store %s', (kind) => {
  let subject: Subject;
  let db: pg.Pool;

  beforeAll(async () => {
    subject = await SUBJECTS[kind]();
    db = openPool(await createTestDatabase());
  });

  afterAll(async () => {
    await db?.end();
    if (kind === 'pkcs11') token?.destroy();
  });

  /** A vault whose tenants' keys are wrapped by `store`, their rows in this test's database. */
  const vaultOver = (store: KeyStore) => {
    const vault = new TokenVault({ vaultKeys: [{ kid: 'ring', key: randomBytes(32) }] });
    const source = { query: (sql: string, params?: unknown[]) => typeormLike(db, sql, params) } as unknown as DataSource;
    const keys = new TenantKeys(
      { keys: { store: 'local', pkcs11: null, transit: null, cacheTtlMs: 60_000, cacheGraceMs: 0 } },
      store,
      new TenantKeysRepository(source),
      vault,
    );
    keys.envelope = true;
    return { vault, keys };
  };
  const ref = (tenantId: string) => ({ table: 'tenants', id: tenantId, column: 'events_secret_enc', tenantId });

  it('round trip: what it wraps, it unwraps', async () => {
    const dataKey = randomBytes(32);
    const wrapped = await subject.store.wrap(dataKey, { tenantId: 'acme', version: 1 });
    expect(wrapped.kekId).toBe(subject.store.describe().kekId);
    expect(wrapped.wrapped).not.toContain(dataKey.toString('base64url'));
    expect((await subject.store.unwrap(wrapped, { tenantId: 'acme', version: 1 })).equals(dataKey)).toBe(true);
  });

  it('refuses a wrong binding: another tenant, another version, a damaged wrapped key', async () => {
    const wrapped = await subject.store.wrap(randomBytes(32), { tenantId: 'acme', version: 1 });
    await expect(subject.store.unwrap(wrapped, { tenantId: 'globex', version: 1 })).rejects.toThrow(VaultError);
    await expect(subject.store.unwrap(wrapped, { tenantId: 'acme', version: 2 })).rejects.toThrow(VaultError);
    const damaged = { ...wrapped, wrapped: wrapped.wrapped.slice(0, -4) + (wrapped.wrapped.endsWith('AAAA') ? 'BBBB' : 'AAAA') };
    await expect(subject.store.unwrap(damaged, { tenantId: 'acme', version: 1 })).rejects.toThrow(VaultError);
    expect(await subject.store.health()).toBe('available');
  });

  it('rotates the KEK: new keys are wrapped by the new KEK, and keys wrapped by the previous one still unwrap', async () => {
    const dataKey = randomBytes(32);
    const before = await subject.store.wrap(dataKey, { tenantId: 'acme', version: 1 });
    const after = await subject.rotated.wrap(dataKey, { tenantId: 'acme', version: 1 });
    expect(after.kekId).not.toBe(before.kekId);
    expect((await subject.rotated.unwrap(before, { tenantId: 'acme', version: 1 })).equals(dataKey)).toBe(true);
    expect((await subject.rotated.unwrap(after, { tenantId: 'acme', version: 1 })).equals(dataKey)).toBe(true);
  });

  it("a tenant's retired data key version still opens what it sealed; a destroyed key never opens", async () => {
    const { vault, keys } = vaultOver(subject.store);
    const v1 = await vault.seal('whsec_one', ref('acme'));
    expect(await keys.rotate('acme')).toBe(2);
    const v2 = await vault.seal('whsec_two', ref('acme'));
    expect([v1.slice(0, 5), v2.slice(0, 5)]).toEqual(['v2.1.', 'v2.2.']);
    // A fresh vault (nothing cached): both versions open from their wrapped keys.
    const fresh = vaultOver(subject.store);
    expect(await fresh.vault.open(v1, ref('acme'))).toBe('whsec_one');
    expect(await fresh.vault.open(v2, ref('acme'))).toBe('whsec_two');
    expect(await keys.destroy('acme')).toBe(2);
    const after = vaultOver(subject.store);
    await expect(after.vault.open(v1, ref('acme'))).rejects.toThrow(/destroyed/);
    await expect(after.vault.open(v2, ref('acme'))).rejects.toThrow(/destroyed/);
  });
});
