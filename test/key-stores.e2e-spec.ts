import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import type { AuditRecord } from '../src/audit/audit-entry.js';
import type { AuditService } from '../src/audit/audit.service.js';
import type { KeyStore } from '../src/vault/key-store.js';
import { LocalKeyStore } from '../src/vault/local-key-store.js';
import { Pkcs11KeyStore } from '../src/vault/pkcs11-key-store.js';
import { TenantKeyResealsRepository } from '../src/vault/tenant-key-reseals.repository.js';
import { TenantKeysAdmin } from '../src/vault/tenant-keys-admin.service.js';
import { TenantKeys } from '../src/vault/tenant-keys.service.js';
import { TenantKeysRepository } from '../src/vault/tenant-keys.repository.js';
import { TokenVault, VaultError } from '../src/vault/token-vault.service.js';
import { TransitKeyStore } from '../src/vault/transit-key-store.js';
import { VaultRepository } from '../src/vault/vault.repository.js';
import { createSoftHsmToken, SOFTHSM_MODULE, type SoftHsmToken } from './support/softhsm.js';
import { createTestDatabase, openPool } from './support/test-database.js';
import { TransitEmulator } from './support/transit-emulator.js';

/** What TypeORM's DataSource.query answers: the rows, or [rows, count] for an UPDATE or a DELETE. */
async function typeormLike(db: pg.Pool, sql: string, params?: unknown[]): Promise<unknown> {
  const r = await db.query(sql, params);
  return r.command === 'UPDATE' || r.command === 'DELETE' ? [r.rows, r.rowCount] : r.rows;
}

/**
 * A key store, and the same store after its KEK was rotated (a new active KEK; the previous one still on hand); and
 * the name of a KEK of the store that can be a tenant's own, with how the operator destroys it (null: not offered).
 */
interface Subject {
  store: KeyStore;
  rotated: KeyStore;
  tenantKek: { name: string; destroy(): Promise<void> } | null;
}

let token: SoftHsmToken;
let transit: TransitEmulator;

const SUBJECTS: Record<string, () => Promise<Subject>> = {
  local: () => {
    const k1 = { kid: 'k1', key: randomBytes(32) };
    const k2 = { kid: 'k2', key: randomBytes(32) };
    return Promise.resolve({
      store: new LocalKeyStore(new TokenVault({ vaultKeys: [k1] })),
      rotated: new LocalKeyStore(new TokenVault({ vaultKeys: [k2, k1] })),
      tenantKek: null,
    });
  },
  pkcs11: async () => {
    // In this process: jest gives tests a copy of process.env, so SOFTHSM2_CONF cannot reach the C library here.
    const label = `cws-test-${randomBytes(4).toString('hex')}`;
    token = createSoftHsmToken(label, 'cws-kek', ['cws-kek-2', 'tenant-initech'], 'system token directory');
    const settings = { module: SOFTHSM_MODULE, tokenLabel: label, pin: token.pin, kekLabel: 'cws-kek' };
    return {
      store: await Pkcs11KeyStore.open(settings),
      rotated: await Pkcs11KeyStore.open({ ...settings, kekLabel: 'cws-kek-2' }),
      tenantKek: { name: 'tenant-initech', destroy: () => Promise.resolve(token.destroyKey('tenant-initech')) },
    };
  },
  // An emulator of the Transit HTTP API (test/support/transit-emulator.ts): no Vault or OpenBao server here.
  transit: async () => {
    const secret = `hvs.${randomBytes(12).toString('base64url')}`;
    transit = await TransitEmulator.start({ token: secret });
    for (const name of ['cws-kek', 'cws-kek-2', 'tenant-initech']) transit.createKey(name);
    const settings = { addr: transit.url, token: secret, mount: 'transit', keyName: 'cws-kek', namespace: null, caFile: null };
    const operator = (method: string, path: string, body?: unknown) =>
      fetch(`${transit.url}/v1/transit/${path}`, {
        method,
        headers: { 'x-vault-token': secret },
        body: body ? JSON.stringify(body) : undefined,
      });
    return {
      store: await TransitKeyStore.open(settings),
      rotated: await TransitKeyStore.open({ ...settings, keyName: 'cws-kek-2' }),
      tenantKek: {
        name: 'tenant-initech',
        // As an operator does: allow the deletion, then delete the key.
        destroy: async () => {
          expect((await operator('POST', 'keys/tenant-initech/config', { deletion_allowed: true })).status).toBe(200);
          expect((await operator('DELETE', 'keys/tenant-initech')).status).toBe(204);
        },
      },
    };
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
    if (kind === 'transit') await transit?.stop();
  });

  /** A vault whose tenants' keys are wrapped by `store`, their rows in this test's database. */
  const vaultOver = (store: KeyStore) => {
    const vault = new TokenVault({ vaultKeys: [{ kid: 'ring', key: randomBytes(32) }] });
    const source = { query: (sql: string, params?: unknown[]) => typeormLike(db, sql, params) } as unknown as DataSource;
    const config = { keys: { store: 'local' as const, pkcs11: null, transit: null, cacheTtlMs: 60_000, cacheGraceMs: 0 } };
    const repo = new TenantKeysRepository(source);
    const keys = new TenantKeys(config, store, repo, vault);
    keys.envelope = true;
    const audits: AuditRecord[] = [];
    const audit = { recordAfter: (r: AuditRecord) => Promise.resolve(void audits.push(r)) } as unknown as AuditService;
    // The re-seal worker is not used here (rotate-kek, set-kek and status only).
    const admin = new TenantKeysAdmin(
      keys,
      repo,
      new VaultRepository(source),
      vault,
      new TenantKeyResealsRepository(source),
      null as never,
      audit,
    );
    return { vault, keys, admin, audits };
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

  it("a tenant's own KEK: its keys rewrapped under it; destroyed in the store, a copy taken before never opens", async () => {
    const { vault, keys, admin, audits } = vaultOver(subject.store);
    const own = subject.tenantKek;
    if (own === null) {
      // local: its KEK is the VAULT_KEYS ring; a key for one tenant could not be shown destroyed everywhere.
      await expect(subject.store.ownKek('tenant-initech')).rejects.toThrow(/offers no per-tenant KEK/);
      await expect(admin.setKek('initech', 'tenant-initech')).rejects.toThrow(/offers no per-tenant KEK/);
      await expect(subject.store.wrap(randomBytes(32), { tenantId: 'initech', version: 1 }, 'tenant-initech')).rejects.toThrow(
        /offers no per-tenant KEK/,
      );
      expect((await db.query(`SELECT 1 FROM tenant_keks`)).rowCount).toBe(0);
      return;
    }
    await expect(admin.setKek('initech', 'no-such-kek')).rejects.toThrow(/no-such-kek/);
    const v1 = await vault.seal('whsec_one', ref('initech'));
    await keys.rotate('initech');
    const v2 = await vault.seal('whsec_two', ref('initech'));
    await vault.seal('whsec_other', ref('hooli'));
    const kekIds = async (tenantId: string) =>
      (await db.query<{ kek_id: string }>(`SELECT kek_id FROM tenant_keys WHERE tenant_id = $1 ORDER BY version`, [tenantId])).rows.map(
        (r) => r.kek_id,
      );
    const shared = subject.store.describe().kekId;
    expect(await kekIds('initech')).toEqual([shared, shared]);

    const set = await admin.setKek('initech', own.name);
    expect(set).toMatchObject({ total: 2, rewrapped: 2, complete: true });
    expect(audits.map((a) => [a.action, a.tenantId, a.outcome, a.details])).toEqual([
      ['tenant_key.kek_set', 'initech', 'success', { kek: own.name, kekId: set.kekId, rewrapped: 2, complete: true }],
    ]);
    expect(set.kekId).toContain(own.name);
    expect(await kekIds('initech')).toEqual([set.kekId, set.kekId]);
    expect(await kekIds('hooli')).toEqual([shared]);
    // Resumable and idempotent: a second run finds nothing left.
    expect(await admin.setKek('initech', own.name)).toMatchObject({ total: 0, rewrapped: 0, complete: true });
    // New versions are wrapped by it; a KEK rotation of the store leaves the tenant to its own.
    expect(await keys.rotate('initech')).toBe(3);
    expect(await kekIds('initech')).toEqual([set.kekId, set.kekId, set.kekId]);
    const rotated = vaultOver(subject.rotated);
    expect((await rotated.admin.rotateKek()).complete).toBe(true);
    expect(await kekIds('initech')).toEqual([set.kekId, set.kekId, set.kekId]);
    expect(await kekIds('hooli')).toEqual([subject.rotated.describe().kekId]);
    expect((await rotated.admin.status()).find((t) => t.tenantId === 'initech')?.ownKek).toBe(own.name);
    const fresh = vaultOver(subject.store);
    expect(await fresh.vault.open(v1, ref('initech'))).toBe('whsec_one');
    expect(await fresh.vault.open(v2, ref('initech'))).toBe('whsec_two');

    // A backup taken before the deletion holds the wrapped keys: they open while the tenant's KEK exists...
    const backup = (
      await db.query<{ version: number; wrapped_key: string; kek_id: string }>(
        `SELECT version, wrapped_key, kek_id FROM tenant_keys WHERE tenant_id = 'initech' ORDER BY version`,
      )
    ).rows;
    const open = (row: (typeof backup)[number]) =>
      subject.store.unwrap({ wrapped: row.wrapped_key, kekId: row.kek_id }, { tenantId: 'initech', version: row.version });
    expect((await open(backup[0])).length).toBe(32);
    expect(await keys.destroy('initech')).toBe(3);
    // ...and never again once the operator destroyed that KEK in the store.
    await own.destroy();
    for (const row of backup) await expect(open(row)).rejects.toThrow();
    expect(await vaultOver(subject.rotated).vault.open(await rotated.vault.seal('whsec_after', ref('hooli')), ref('hooli'))).toBe(
      'whsec_after',
    );
  });
});
