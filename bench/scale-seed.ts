// What bench/scale.ts (and test/scale.e2e-spec.ts) store before the service starts: tenants, connections and
// events written straight through SQL, in bulk. Every connection's pair is sealed with the real TokenVault
// under its own id (the vault binds a ciphertext to its row as AAD, so rows cannot share one ciphertext);
// the plaintext is the same access token for all of them, so any connection can serve a facade call.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { sealTokens } from '../src/connections/connection-tokens.js';
import { TokenVault } from '../src/vault/token-vault.service.js';

/** The tenant that holds half of the connections (and events): a big partner customer, whose pages go deep. */
export const BIG_TENANT = 't00000';
/**
 * One connection in this many is reauth_required (the `status` filter's rows): dense enough that the big tenant
 * of the smallest size (500 connections at 1k) holds a full page of them, so that the pages compared across
 * sizes hold the same rows.
 */
export const REAUTH_EVERY = 4;

export function tenantId(i: number): string {
  return `t${String(i).padStart(5, '0')}`;
}

/** Where connection number `i` of `total` lives: the first half in the big tenant, the rest spread over the others. */
export function tenantOf(i: number, total: number, tenants: number): string {
  const big = Math.floor(total / 2);
  return i < big ? BIG_TENANT : tenantId(1 + ((i - big) % (tenants - 1)));
}

export interface ScaleSeed {
  tenants: number;
  connections: number;
  /** The access token (and its expiry, ms) every connection holds, sealed under its own id. */
  accessToken: string;
  accessExpiresAt: Date;
}

/** Tenants `t00000`… (environment sandbox, no events target), in one statement. */
export async function seedTenants(db: pg.ClientBase, vaultKeys: string, count: number): Promise<void> {
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const ids = Array.from({ length: count }, (_, i) => tenantId(i));
  const secrets = await Promise.all(
    ids.map((id) => vault.seal(`whsec_${randomUUID()}`, { table: 'tenants', id, column: 'events_secret_enc', tenantId: id })),
  );
  await db.query(
    `INSERT INTO tenants (id, name, environment, allowed_return_urls, events_secret_enc, created_at, updated_at)
     SELECT t.id, 'Tenant ' || t.id, 'sandbox', '["http://localhost:5173/"]'::jsonb, t.secret, now() - (($3 - t.i) * interval '1 second'), now()
       FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(id, secret, i)`,
    [ids, secrets, count],
  );
}

/**
 * `count` user connections `u-<i>` (see tenantOf), in creation order, none due for a day. Sealing is the
 * slow part (two AES-GCM seals a row); rows go 10,000 to a statement as arrays.
 */
export async function seedConnections(db: pg.ClientBase, vaultKeys: string, seed: ScaleSeed): Promise<void> {
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const chunk = 10_000;
  for (let from = 0; from < seed.connections; from += chunk) {
    const n = Math.min(chunk, seed.connections - from);
    const ids: string[] = [];
    const tenants: string[] = [];
    const users: string[] = [];
    const access: string[] = [];
    const refresh: string[] = [];
    const statuses: string[] = [];
    for (let k = 0; k < n; k++) {
      const i = from + k;
      const id = randomUUID();
      // The refresh token is never used: only connections made due (makeDue) are renewed, with a fresh pair.
      const tenant = tenantOf(i, seed.connections, seed.tenants);
      const sealed = await sealTokens(vault, { id, tenantId: tenant }, { accessToken: seed.accessToken, refreshToken: `unused-${i}` });
      ids.push(id);
      tenants.push(tenant);
      users.push(`u-${i}`);
      access.push(sealed.accessTokenEnc);
      refresh.push(sealed.refreshTokenEnc);
      statuses.push(i % REAUTH_EVERY === REAUTH_EVERY - 1 ? 'reauth_required' : 'active');
    }
    await db.query(
      `INSERT INTO connections (id, tenant_id, kind, user_id, upstream_user_id, upstream_email, status, scopes,
                                access_token_enc, refresh_token_enc, access_token_expires_at, refresh_due_at, created_at, updated_at)
       SELECT v.id, v.tenant_id, 'user', v.user_id, 'alice', 'alice@acme.example', v.status, '["workflows.read"]'::jsonb,
              v.at, v.rt, $7::timestamptz, now() + interval '1 day' + (v.i * interval '1 ms'),
              now() - (($8 - v.i) * interval '1 ms'), now()
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS v(id, tenant_id, user_id, at, rt, status, i)`,
      [ids, tenants, users, access, refresh, statuses, seed.accessExpiresAt, seed.connections - from],
    );
  }
}

/**
 * Events of today's events table (one table; the retention work partitions it by day): half in the big tenant,
 * the rest spread, all delivered, received over the last `count` × 10 ms. One statement (generate_series).
 * The one place that writes events in bulk, so that a partitioned table needs a change here only.
 */
export async function seedEvents(db: pg.ClientBase, tenants: number, count: number, payload: string): Promise<void> {
  if (count <= 0) return;
  await db.query(
    `INSERT INTO events (id, tenant_id, source, type, payload, received_at, delivery_state, delivered_at)
     SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN $3 ELSE 't' || lpad((1 + (g / 2) % ($2 - 1))::text, 5, '0') END,
            'upstream', 'workflow_step_updated', $4::jsonb, now() - (($1 - g) * interval '10 ms'), 'delivered', now()
       FROM generate_series(1, $1::int) AS g`,
    [count, tenants, BIG_TENANT, payload],
  );
}

/**
 * Audit rows, as the API's writes leave them: half in the big tenant, the rest spread over the others, one a
 * second back from now (newest first is the audit pages' order). One statement (generate_series).
 */
export async function seedAudit(db: pg.ClientBase, tenants: number, count: number): Promise<void> {
  if (count <= 0) return;
  await db.query(
    `INSERT INTO audit_log (id, at, actor_kind, actor_id, action, tenant_id, target, request_id, outcome)
     SELECT gen_random_uuid(), now() - (g * interval '1 second'), 'tenant_key', gen_random_uuid()::text, 'connection.deleted',
            CASE WHEN g % 2 = 0 THEN $3 ELSE 't' || lpad((1 + (g / 2) % ($2 - 1))::text, 5, '0') END,
            'connections/' || gen_random_uuid(), 'req-' || g, 'success'
       FROM generate_series(1, $1::int) AS g`,
    [count, tenants, BIG_TENANT],
  );
}

/**
 * Everything a seeded bench stores before the service starts: `tenants` tenants, `connections` connections
 * holding `shared`'s access token (an upstream pair of the sandbox's), `events` events, as many audit rows as
 * connections, then VACUUM ANALYZE.
 * Answers the seconds it took.
 */
export async function seedAll(
  db: pg.ClientBase,
  vaultKeys: string,
  shared: { access_token: string; expiresIn: number },
  size: { tenants: number; connections: number; events: number; payload: string },
): Promise<number> {
  const t = performance.now();
  await seedTenants(db, vaultKeys, size.tenants);
  await seedConnections(db, vaultKeys, {
    tenants: size.tenants,
    connections: size.connections,
    accessToken: shared.access_token,
    accessExpiresAt: new Date(Date.now() + shared.expiresIn * 1000),
  });
  await seedEvents(db, size.tenants, size.events, size.payload);
  await seedAudit(db, size.tenants, size.connections);
  await db.query('VACUUM ANALYZE');
  // The seed's dirty pages written now, not by the checkpointer on the same cores while the first figures run.
  await db.query('CHECKPOINT');
  return (performance.now() - t) / 1000;
}

/**
 * Makes `pairs.length` connections of the big tenant due now, each with a fresh pair from the upstream
 * (sealed under its id), so that the scheduler renews them. Answers when the rows were made due (the
 * database's clock) and their ids.
 */
export async function makeDue(
  db: pg.ClientBase,
  vaultKeys: string,
  firstUser: number,
  pairs: Array<{ access_token: string; refresh_token: string }>,
): Promise<{ at: Date; ids: string[] }> {
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
  const users = pairs.map((_, k) => `u-${firstUser + k}`);
  const rows = await db.query<{ id: string; user_id: string }>(
    `SELECT id, user_id FROM connections WHERE tenant_id = $1 AND kind = 'user' AND user_id = ANY($2::text[])`,
    [BIG_TENANT, users],
  );
  const byUser = new Map(rows.rows.map((r) => [r.user_id, r.id]));
  const ids: string[] = [];
  const access: string[] = [];
  const refresh: string[] = [];
  for (const [k, pair] of pairs.entries()) {
    const id = byUser.get(users[k]);
    if (!id) throw new Error(`no connection ${users[k]}`);
    const sealed = await sealTokens(
      vault,
      { id, tenantId: BIG_TENANT },
      { accessToken: pair.access_token, refreshToken: pair.refresh_token },
    );
    ids.push(id);
    access.push(sealed.accessTokenEnc);
    refresh.push(sealed.refreshTokenEnc);
  }
  const r = await db.query<{ at: Date }>(
    `WITH due AS (
       UPDATE connections c SET access_token_enc = v.at, refresh_token_enc = v.rt, status = 'active', refresh_due_at = now(),
              last_refreshed_at = NULL, version = c.version + 1
         FROM unnest($1::uuid[], $2::text[], $3::text[]) AS v(id, at, rt) WHERE c.id = v.id RETURNING c.id)
     SELECT now() AS at`,
    [ids, access, refresh],
  );
  return { at: r.rows[0].at, ids };
}
