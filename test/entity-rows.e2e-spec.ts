import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DataSource, type EntityTarget, type ObjectLiteral } from 'typeorm';
import { ConsoleSessionEntity } from '../src/auth/console-session.entity.js';
import { TenantApiKeyEntity } from '../src/auth/tenant-api-key.entity.js';
import { ConnectionEntity } from '../src/connections/store/connection.entity.js';
import { EntityRows } from '../src/database/entity-rows.js';
import { TenantEntity } from '../src/tenants/tenant.entity.js';
import { createTestDatabase } from './support/test-database.js';

/**
 * The prepared reads map their rows with EntityRows (src/database/entity-rows.ts) instead of TypeORM's hydration:
 * for every entity they read, a row mapped by it equals the entity TypeORM gives for the same row (dates, JSON,
 * bytes, the bigint version as a number, nulls), and a subset of properties maps only those.
 */
describe('EntityRows maps a row as TypeORM hydrates it', () => {
  let ds: DataSource;
  const connectionId = randomUUID();
  const keyId = randomUUID();
  const sessionId = randomUUID();

  beforeAll(async () => {
    ds = new DataSource({
      type: 'postgres',
      url: await createTestDatabase(),
      entities: [ConnectionEntity, TenantEntity, TenantApiKeyEntity, ConsoleSessionEntity],
    });
    await ds.initialize();
    await ds.query(
      `INSERT INTO tenants (id, name, environment, allowed_return_urls, events_secret_enc, event_types, event_retention_days)
       VALUES ('acme', 'Acme', 'sandbox', '["https://acme.example/back"]', 'sealed-secret', '["workflow_step_updated"]', 14)`,
    );
    await ds.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, upstream_email, status, scopes, access_token_enc,
                                refresh_token_enc, access_token_expires_at, refresh_due_at, version, lease_owner, lease_until)
       VALUES ($1, 'acme', 'user', 'u-1', 'alice', NULL, 'active', '["workflows.read","userinfo.read"]', 'sealed-a', 'sealed-r',
               '2026-11-27 18:22:37.107123+00', now(), 9007199254740991, 'i-1', now())`,
      [connectionId],
    );
    await ds.query(
      `INSERT INTO tenant_api_keys (id, tenant_id, name, key_prefix, key_hash) VALUES ($1, 'acme', NULL, 'cws_abc', '\\x00ff10')`,
      [keyId],
    );
    await ds.query(
      `INSERT INTO console_sessions (id, token_hash, created_at, expires_at) VALUES ($1, '\\xdeadbeef', now(), now() + interval '1 hour')`,
      [sessionId],
    );
  });

  afterAll(async () => {
    await ds?.destroy();
  });

  const both = async <T extends ObjectLiteral>(target: new () => T, table: string, id: string) => {
    const rows = new EntityRows(ds, target, 'x');
    const [raw] = (await ds.query(`SELECT ${rows.select} FROM ${table} x WHERE x.id = $1`, [id])) as Array<Record<string, unknown>>;
    const hydrated = await ds.getRepository(target as EntityTarget<T>).findOneBy({ id } as never);
    return { mapped: rows.map(raw), hydrated };
  };

  it('for connections, tenants, tenant API keys and console sessions', async () => {
    for (const [target, table, id] of [
      [ConnectionEntity, 'connections', connectionId],
      [TenantEntity, 'tenants', 'acme'],
      [TenantApiKeyEntity, 'tenant_api_keys', keyId],
      [ConsoleSessionEntity, 'console_sessions', sessionId],
    ] as const) {
      const { mapped, hydrated } = await both<ObjectLiteral>(target as new () => ObjectLiteral, table, id);
      expect(hydrated).not.toBeNull();
      expect(mapped).toEqual(hydrated);
      expect(mapped).toBeInstanceOf(target);
    }
    const { mapped } = await both(ConnectionEntity, 'connections', connectionId);
    expect(typeof mapped.version).toBe('number');
    expect(mapped.scopes).toEqual(['workflows.read', 'userinfo.read']);
  });

  it('a subset of properties selects and maps only those', async () => {
    const rows = new EntityRows(ds, ConnectionEntity, 'c', ['id', 'status', 'scopes'] as const);
    expect(rows.select).toBe('c."id", c."status", c."scopes"');
    const [raw] = (await ds.query(`SELECT ${rows.select} FROM connections c WHERE c.id = $1`, [connectionId])) as Array<
      Record<string, unknown>
    >;
    expect({ ...rows.map(raw) }).toEqual({ id: connectionId, status: 'active', scopes: ['workflows.read', 'userinfo.read'] });
    expect(() => new EntityRows(ds, ConnectionEntity, 'c', ['id', 'nope' as 'id'])).toThrow(/not every property/);
  });
});
