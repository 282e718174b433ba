import { Inject, Injectable } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { type SealedRef, TokenVault } from '../vault/token-vault.service.js';
import type { ConnectionEntity } from './store/connection.entity.js';
import type { RenewedFields } from './store/connections.repository.js';

/**
 * How a connection's tokens are kept: sealed with the row id and column in their AAD, and renewed at
 * REFRESH_AT of their life. The connect flow and renewal both store pairs through it.
 */
@Injectable()
export class ConnectionTokens {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly vault: TokenVault,
  ) {}

  /** What a new pair stores on the connection row `owner` (its id and tenant), received at `now`. */
  async fields(
    owner: ConnectionOwner,
    tokens: Pick<TokenSet, 'accessToken' | 'refreshToken' | 'expiresIn'>,
    now: Date,
  ): Promise<RenewedFields> {
    return {
      ...(await sealTokens(this.vault, owner, tokens)),
      accessTokenExpiresAt: new Date(now.getTime() + tokens.expiresIn * 1000),
      refreshDueAt: refreshDueAt(now, tokens.expiresIn, this.config.refresh.at),
      now,
    };
  }

  /** Loads the key the connection's next pair will be sealed with: throws AppError('key_store_unavailable') when it cannot be had. */
  prepareSeal(owner: ConnectionOwner): Promise<void> {
    return this.vault.prepareSeal(owner.tenantId);
  }

  openAccessToken(c: ConnectionOwner & { accessTokenEnc: string }): Promise<string> {
    return this.vault.open(c.accessTokenEnc, accessTokenRef(c));
  }

  openRefreshToken(c: ConnectionOwner & { refreshTokenEnc: string }): Promise<string> {
    return this.vault.open(c.refreshTokenEnc, refreshTokenRef(c));
  }
}

/** A connection row as its sealed tokens are bound to it: its id, and the tenant whose data key seals them. */
export type ConnectionOwner = Pick<ConnectionEntity, 'id' | 'tenantId'>;

export function accessTokenRef(c: ConnectionOwner): SealedRef {
  return { table: 'connections', id: c.id, column: 'access_token_enc', tenantId: c.tenantId };
}

export function refreshTokenRef(c: ConnectionOwner): SealedRef {
  return { table: 'connections', id: c.id, column: 'refresh_token_enc', tenantId: c.tenantId };
}

export async function sealTokens(vault: TokenVault, owner: ConnectionOwner, tokens: Pick<TokenSet, 'accessToken' | 'refreshToken'>) {
  return {
    accessTokenEnc: await vault.seal(tokens.accessToken, accessTokenRef(owner)),
    refreshTokenEnc: await vault.seal(tokens.refreshToken, refreshTokenRef(owner)),
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
