/**
 * Every column that holds a sealed secret. Re-encryption walks exactly this list, so a new sealed column
 * must be added here in the same change that creates it. Identifiers here are trusted: they are spliced
 * into SQL (quoted) by the vault repository.
 */
export interface SealedColumn {
  table: string;
  idColumn: string;
  column: string;
  /** The column naming the tenant whose data key seals the value (SealedRef.tenantId). */
  tenantColumn: string;
}

export const SEALED_COLUMNS: readonly SealedColumn[] = Object.freeze([
  { table: 'tenants', idColumn: 'id', column: 'events_secret_enc', tenantColumn: 'id' },
  { table: 'tenants', idColumn: 'id', column: 'events_secret_prev_enc', tenantColumn: 'id' },
  { table: 'connections', idColumn: 'id', column: 'access_token_enc', tenantColumn: 'tenant_id' },
  { table: 'connections', idColumn: 'id', column: 'refresh_token_enc', tenantColumn: 'tenant_id' },
  { table: 'webhook_receivers', idColumn: 'id', column: 'secret_enc', tenantColumn: 'tenant_id' },
  { table: 'event_endpoints', idColumn: 'id', column: 'secret_enc', tenantColumn: 'tenant_id' },
  { table: 'event_endpoints', idColumn: 'id', column: 'secret_prev_enc', tenantColumn: 'tenant_id' },
  // Synced records are bound to tenant/user/workflow: sealed_id is that, a generated column.
  { table: 'records', idColumn: 'sealed_id', column: 'data_enc', tenantColumn: 'tenant_id' },
  { table: 'record_changes', idColumn: 'sealed_id', column: 'data_enc', tenantColumn: 'tenant_id' },
]);

/**
 * The tenants' data keys, wrapped: with KEY_STORE=local they are values of the VAULT_KEYS ring like any other, so
 * the start-up key check counts them, but they are rewrapped by `keys rotate-kek`, never re-sealed by
 * vault:reencrypt (a data key is never sealed with a data key).
 */
export const WRAPPED_KEYS: SealedColumn = Object.freeze({
  table: 'tenant_keys',
  idColumn: 'id',
  column: 'wrapped_key',
  tenantColumn: 'tenant_id',
});
