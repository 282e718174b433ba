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

  /** What a new pair stores on row `connectionId`, received at `now`. */
  fields(connectionId: string, tokens: Pick<TokenSet, 'accessToken' | 'refreshToken' | 'expiresIn'>, now: Date): RenewedFields {
    return {
      ...sealTokens(this.vault, connectionId, tokens),
      accessTokenExpiresAt: new Date(now.getTime() + tokens.expiresIn * 1000),
      refreshDueAt: refreshDueAt(now, tokens.expiresIn, this.config.refresh.at),
      now,
    };
  }

  openAccessToken(c: Pick<ConnectionEntity, 'id'> & { accessTokenEnc: string }): string {
    return this.vault.open(c.accessTokenEnc, accessTokenRef(c.id));
  }

  openRefreshToken(c: Pick<ConnectionEntity, 'id'> & { refreshTokenEnc: string }): string {
    return this.vault.open(c.refreshTokenEnc, refreshTokenRef(c.id));
  }
}

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
