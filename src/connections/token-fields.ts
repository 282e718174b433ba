import type { TokenSet } from '../upstream/upstream.types.js';
import type { SealedRef, TokenVault } from '../vault/token-vault.service.js';

export function accessTokenRef(connectionId: string): SealedRef {
  return { table: 'connections', id: connectionId, column: 'access_token_enc' };
}

export function refreshTokenRef(connectionId: string): SealedRef {
  return { table: 'connections', id: connectionId, column: 'refresh_token_enc' };
}

export function sealTokens(vault: TokenVault, connectionId: string, tokens: Pick<TokenSet, 'accessToken' | 'refreshToken'>) {
  return {
    accessTokenEnc: vault.seal(tokens.accessToken, accessTokenRef(connectionId)),
    refreshTokenEnc: vault.seal(tokens.refreshToken, refreshTokenRef(connectionId)),
  };
}

/**
 * When the scheduler should renew a token: after REFRESH_AT of its lifetime, minus up to 5% of the
 * lifetime of jitter so that tokens issued together are not all renewed in the same instant.
 */
export function refreshDueAt(now: Date, expiresInSeconds: number, refreshAt: number, random: () => number = Math.random): Date {
  const lifetimeMs = expiresInSeconds * 1000;
  const fraction = Math.max(0.05, refreshAt - random() * 0.05);
  return new Date(now.getTime() + lifetimeMs * fraction);
}
