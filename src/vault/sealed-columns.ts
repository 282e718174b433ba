/**
 * Every column that holds a sealed secret. Re-encryption walks exactly this list, so a new sealed column
 * must be added here in the same change that creates it. Identifiers here are trusted: they are spliced
 * into SQL (quoted) by the vault repository.
 */
export interface SealedColumn {
  table: string;
  idColumn: string;
  column: string;
}

export const SEALED_COLUMNS: readonly SealedColumn[] = Object.freeze([
  { table: 'tenants', idColumn: 'id', column: 'events_secret_enc' },
  { table: 'tenants', idColumn: 'id', column: 'events_secret_prev_enc' },
  { table: 'connections', idColumn: 'id', column: 'access_token_enc' },
  { table: 'connections', idColumn: 'id', column: 'refresh_token_enc' },
  { table: 'webhook_receivers', idColumn: 'id', column: 'secret_enc' },
]);
