import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { TokenVault, VaultError, type SealedRef } from './token-vault.service.js';
import { sealingKeyOf } from './vault-instances.service.js';

const ref: SealedRef = { table: 'connections', id: 'c-1', column: 'access_token_enc', tenantId: 'acme' };
const key = (kid: string) => ({ kid, key: randomBytes(32) });

describe('sealingKeyOf', () => {
  const live = (...rings: string[][]) => rings.map((keyIds, i) => ({ instanceId: `i${i}`, keyIds }));

  it('is the active key once every live instance holds it', () => {
    expect(sealingKeyOf(['new', 'old'], live(['new', 'old'], ['new', 'old']))).toBe('new');
  });

  it('stays on the previous key while one live instance lacks the new one', () => {
    expect(sealingKeyOf(['new', 'old'], live(['new', 'old'], ['old']))).toBe('old');
  });

  it('is the first key for the only instance (an empty table before it registered)', () => {
    expect(sealingKeyOf(['first'], live(['first']))).toBe('first');
    expect(sealingKeyOf(['first'], [])).toBe('first');
  });

  it('is null when no key of the ring is held by everyone (the previous key dropped too early)', () => {
    expect(sealingKeyOf(['new'], live(['new'], ['old']))).toBeNull();
  });
});

describe('TokenVault sealing key and ring lag', () => {
  it('seals with the key it is told while the active key stays first', async () => {
    const [n, o] = [key('new'), key('old')];
    const vault = new TokenVault({ vaultKeys: [n, o] });
    vault.sealWithKey('old');
    const sealed = await vault.seal('secret', ref);
    expect(sealed.startsWith('v1.old.')).toBe(true);
    expect(vault.activeKid).toBe('new');
    expect(await new TokenVault({ vaultKeys: [o] }).open(sealed, ref)).toBe('secret');
    expect(() => vault.sealWithKey('other')).toThrow(/not in VAULT_KEYS/);
  });

  it('tells a value under a key other instances hold (ring behind) from a value under a key nobody knows', async () => {
    const sealed = await new TokenVault({ vaultKeys: [key('new')] }).seal('secret', ref);
    const old = new TokenVault({ vaultKeys: [key('old')] });
    const unknown = await old.open(sealed, ref).then(
      () => {
        throw new Error('expected an error');
      },
      (e: unknown) => e as VaultError,
    );
    expect(unknown.ringBehind).toBe(false);
    expect(unknown.contractAnswer.status).toBe(500);
    old.knownElsewhere(['new']);
    await expect(old.open(sealed, ref)).rejects.toMatchObject({ ringBehind: true });
    expect(old.tryOpen(sealed, ref)).toBeNull();
  });
});
