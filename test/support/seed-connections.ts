import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { parseVaultKeys } from '../../src/config/app-config.js';
import { refreshDueAt, sealTokens } from '../../src/connections/connection-tokens.js';
import { TokenVault } from '../../src/vault/token-vault.service.js';
import { standaloneVault } from './standalone-vault.js';

/** A token pair as the sandbox's issueTokens (or POST /_sandbox/tokens) hands it out. */
export interface IssuedPair {
  access_token: string;
  refresh_token: string;
  expiresIn: number;
  scope: string[];
  family: string;
}

export interface SeedConnection {
  tenantId: string;
  /** The partner's user id (unique per tenant). */
  userId: string;
  /** The sandbox user the grant belongs to. */
  upstreamUserId: string;
  tokens: IssuedPair;
  /** When the tokens were issued (default now): expiry and due time follow from it and expiresIn. */
  issuedAt?: Date;
  /** Override the scheduler's due time (e.g. now, for a renewal storm). */
  dueAt?: Date;
}

export interface SeededConnection {
  id: string;
  family: string;
  userId: string;
  issuedAt: Date;
  expiresAt: Date;
}

/**
 * Inserts connection rows directly (no browser), sealed with the real TokenVault under the same VAULT_KEYS
 * as the app that will read them. Multi-row INSERTs, so thousands take a moment, not minutes.
 */
export async function seedConnections(
  db: pg.Pool | pg.Client,
  vaultKeys: string,
  items: SeedConnection[],
  refreshAt = 0.8,
): Promise<SeededConnection[]> {
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const out: SeededConnection[] = [];
  const chunk = 500;
  for (let i = 0; i < items.length; i += chunk) {
    const values: unknown[] = [];
    const tuples: string[] = [];
    for (const item of items.slice(i, i + chunk)) {
      const id = randomUUID();
      const issuedAt = item.issuedAt ?? new Date();
      const expiresAt = new Date(issuedAt.getTime() + item.tokens.expiresIn * 1000);
      const tokens = { accessToken: item.tokens.access_token, refreshToken: item.tokens.refresh_token };
      const sealed = await sealTokens(vault, { id, tenantId: item.tenantId }, tokens);
      const p = values.length;
      tuples.push(
        `($${p + 1}, $${p + 2}, 'user', $${p + 3}, $${p + 4}, $${p + 5}, 'active', $${p + 6}::jsonb, $${p + 7}, $${p + 8}, $${p + 9}, $${p + 10}, $${p + 11}, $${p + 11})`,
      );
      values.push(
        id,
        item.tenantId,
        item.userId,
        item.upstreamUserId,
        `${item.upstreamUserId}@acme.example`,
        JSON.stringify(item.tokens.scope),
        sealed.accessTokenEnc,
        sealed.refreshTokenEnc,
        expiresAt,
        item.dueAt ?? refreshDueAt(issuedAt, item.tokens.expiresIn, refreshAt),
        issuedAt,
      );
      out.push({ id, family: item.tokens.family, userId: item.userId, issuedAt, expiresAt });
    }
    await db.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, upstream_email, status, scopes,
                                access_token_enc, refresh_token_enc, access_token_expires_at, refresh_due_at, created_at, updated_at)
       VALUES ${tuples.join(', ')}`,
      values,
    );
  }
  return out;
}

/**
 * Opens a stored access token (for a resource call in a test, never for output), in either format: a value
 * sealed with the tenant's data key is opened through tenant_keys, read with `db`.
 */
export function openAccessToken(
  vaultKeys: string,
  db: pg.Pool | pg.Client,
  connection: { id: string; tenantId: string },
  sealed: string,
): Promise<string> {
  return standaloneVault(vaultKeys, db).open(sealed, {
    table: 'connections',
    id: connection.id,
    column: 'access_token_enc',
    tenantId: connection.tenantId,
  });
}
