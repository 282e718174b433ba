import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { TokenVault, VaultError, type SealedRef } from './token-vault.service.js';

const oldKey = { kid: 'old', key: randomBytes(32) };
const newKey = { kid: 'new', key: randomBytes(32) };
const ref: SealedRef = { table: 'connections', id: 'c-1', column: 'access_token_enc', tenantId: 'acme' };
const secret = 'at_3b1f9c0e7d2a4b6c8e0f1a2b3c4d5e6f';

function vault(...keys: Array<{ kid: string; key: Buffer }>): TokenVault {
  return new TokenVault({ vaultKeys: keys });
}

async function errorOf(fn: () => Promise<unknown>): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected an error');
}

/** Replaces one base64url part of a sealed value (1 = kid, 2 = iv, 3 = ciphertext, 4 = tag). */
function withPart(sealed: string, index: number, change: (part: string) => string): string {
  const parts = sealed.split('.');
  parts[index] = change(parts[index]);
  return parts.join('.');
}

function flipFirstByte(part: string): string {
  const bytes = Buffer.from(part, 'base64url');
  bytes[0] ^= 0x01;
  return bytes.toString('base64url');
}

describe('TokenVault', () => {
  it('opens what it sealed', async () => {
    const v = vault(oldKey);
    expect(await v.open(await v.seal(secret, ref), ref)).toBe(secret);
    expect(await v.open(await v.seal('', ref), ref)).toBe('');
    expect(await v.open(await v.seal('ünïcødé ✓', ref), ref)).toBe('ünïcødé ✓');
  });

  it('writes v1.<kid>.<iv>.<ciphertext>.<tag> with a 12-byte IV and a 16-byte tag, and no plaintext', async () => {
    const sealed = await vault(oldKey).seal(secret, ref);
    const [version, kid, iv, ciphertext, tag, ...rest] = sealed.split('.');
    expect([version, kid, rest]).toEqual(['v1', 'old', []]);
    expect(Buffer.from(iv, 'base64url')).toHaveLength(12);
    expect(Buffer.from(tag, 'base64url')).toHaveLength(16);
    expect(Buffer.from(ciphertext, 'base64url')).toHaveLength(Buffer.byteLength(secret));
    expect(sealed).not.toContain(secret);
  });

  it('uses a fresh IV for every seal', async () => {
    const v = vault(oldKey);
    const a = await v.seal(secret, ref);
    const b = await v.seal(secret, ref);
    expect(a).not.toBe(b);
    expect(a.split('.')[2]).not.toBe(b.split('.')[2]);
  });

  it('never repeats an IV across refills of its random pool, and every value still opens', async () => {
    const v = vault(oldKey);
    // The pool holds 512 IVs: 2,000 seals refill it three times.
    const sealed = await Promise.all(Array.from({ length: 2000 }, (_, i) => v.seal(`${secret}-${i}`, ref)));
    const ivs = sealed.map((s) => s.split('.')[2]);
    expect(new Set(ivs).size).toBe(ivs.length);
    expect(ivs).not.toContain(Buffer.alloc(12).toString('base64url'));
    for (const [i, s] of sealed.entries()) expect(await v.open(s, ref)).toBe(`${secret}-${i}`);
  });

  it('does not open a value moved to another row, column or table', async () => {
    const v = vault(oldKey);
    const sealed = await v.seal(secret, ref);
    await expect(v.open(sealed, { ...ref, id: 'c-2' })).rejects.toThrow(VaultError);
    await expect(v.open(sealed, { ...ref, column: 'refresh_token_enc' })).rejects.toThrow(VaultError);
    await expect(v.open(sealed, { ...ref, table: 'webhook_receivers' })).rejects.toThrow(VaultError);
  });

  it('binds the owner unambiguously: fields cannot be shifted across the separator', async () => {
    const v = vault(oldKey);
    const sealed = await v.seal(secret, { table: 'a', id: 'b.c', column: 'd', tenantId: 't' });
    await expect(v.open(sealed, { table: 'a.b', id: 'c', column: 'd', tenantId: 't' })).rejects.toThrow(VaultError);
    await expect(v.seal(secret, { table: 'a', id: 'b\0c', column: 'd', tenantId: 't' })).rejects.toThrow(VaultError);
    await expect(v.seal(secret, { table: 'a', id: '', column: 'd', tenantId: 't' })).rejects.toThrow(VaultError);
  });

  it('rejects a tampered ciphertext, tag or IV', async () => {
    const v = vault(oldKey);
    const sealed = await v.seal(secret, ref);
    for (const index of [2, 3, 4]) {
      await expect(v.open(withPart(sealed, index, flipFirstByte), ref)).rejects.toThrow(VaultError);
    }
    await expect(
      v.open(
        withPart(sealed, 4, (t) => t.slice(0, 10)),
        ref,
      ),
    ).rejects.toThrow(/malformed/);
    await expect(
      v.open(
        withPart(sealed, 3, (c) => c + 'AA'),
        ref,
      ),
    ).rejects.toThrow(VaultError);
  });

  it('rejects values that are not sealed text', async () => {
    const v = vault(oldKey);
    for (const bad of ['', secret, 'v1.old.x.y', 'v2.old.AAAA.AAAA.AAAA', 'v1.old.a+b.AAAA.AAAA', `v1.${secret}!.AAAA.AAAA.AAAA`]) {
      const e = await errorOf(() => v.open(bad, ref));
      expect(e).toBeInstanceOf(VaultError);
      expect(e.message).not.toContain(secret);
    }
  });

  it('keeps opening values under an old key and seals new ones under the active key', async () => {
    const before = vault(oldKey);
    const underOld = await before.seal(secret, ref);
    const rotated = vault(newKey, oldKey);
    expect(rotated.activeKid).toBe('new');
    expect(await rotated.open(underOld, ref)).toBe(secret);
    expect(rotated.isCurrent(underOld)).toBe(false);
    const underNew = await rotated.seal(secret, ref);
    expect(underNew.startsWith('v1.new.')).toBe(true);
    expect(rotated.isCurrent(underNew)).toBe(true);
    expect(await rotated.open(underNew, ref)).toBe(secret);
    await expect(before.open(underNew, ref)).rejects.toThrow(VaultError);
  });

  it('fails on an unknown kid with a message free of secrets', async () => {
    const sealed = await vault(oldKey).seal(secret, ref);
    const e = await errorOf(() => vault(newKey).open(sealed, ref));
    expect(e).toBeInstanceOf(VaultError);
    expect(e.message).toContain('"old"');
    expect(e.message).toContain('connections.access_token_enc');
    for (const leak of [
      secret,
      sealed,
      ...sealed.split('.').slice(2),
      oldKey.key.toString('base64'),
      newKey.key.toString('base64'),
      ref.id,
    ]) {
      expect(e.message).not.toContain(leak);
    }
    expect(e).toMatchObject({ table: 'connections', column: 'access_token_enc', kid: 'old' });
  });

  it('fails on a wrong key under a known kid with a message free of secrets', async () => {
    const sealed = await vault(oldKey).seal(secret, ref);
    const impostor = vault({ kid: 'old', key: randomBytes(32) });
    const e = await errorOf(() => impostor.open(sealed, ref));
    expect(e).toBeInstanceOf(VaultError);
    for (const leak of [secret, sealed, ...sealed.split('.').slice(2)]) expect(e.message).not.toContain(leak);
    expect(e.cause).toBeUndefined();
  });

  it('does not reveal key material through inspection', () => {
    const v = vault(oldKey);
    for (const shown of [JSON.stringify(v), inspect(v, { depth: 10, showHidden: true })]) {
      expect(shown).not.toContain(oldKey.key.toString('base64'));
      expect(shown).not.toContain(oldKey.key.toString('hex'));
    }
  });
});
