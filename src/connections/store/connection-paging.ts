import type pg from 'pg';
import type { EntityRows } from '../../database/entity-rows.js';
import { exactTime } from '../../database/exact-time.js';
import type { ConnectionEntity, ConnectionKind, ConnectionStatus } from './connection.entity.js';
import { type LastError, lastErrorOf } from './connection-health.repository.js';

/** Where a page starts: after this (created_at, id), created_at as PostgreSQL's exact text (microseconds). */
export interface PagePosition {
  createdAt: string;
  id: string;
}

export interface ConnectionFilter {
  userId?: string;
  kind?: ConnectionKind;
  status?: ConnectionStatus;
}

/**
 * What a list page reads of each connection: what the API shows of it (ConnectionResponseDto), not its sealed
 * tokens, lease or due time (two ciphertexts and three timestamps a row that PostgreSQL would format and the
 * app parse, for nothing). createdAt comes as text (exactTime): it is also the row's position.
 */
export const LISTED_PROPERTIES = [
  'id',
  'kind',
  'userId',
  'upstreamUserId',
  'upstreamEmail',
  'isAdmin',
  'status',
  'statusReason',
  'scopes',
  'accessTokenExpiresAt',
  'lastRefreshedAt',
] as const;
export type ListedConnection = Pick<ConnectionEntity, (typeof LISTED_PROPERTIES)[number] | 'createdAt'>;

/** A listed connection, with the position that a page starting after it needs. */
export interface PagedConnection {
  connection: ListedConnection;
  lastError: LastError | null;
  position: PagePosition;
}

/** The first page starts after this position: before every row (created_at is never -infinity). */
const BEFORE_ALL: PagePosition = { createdAt: '-infinity', id: '00000000-0000-0000-0000-000000000000' };

/**
 * The kinds and statuses as SQL literals. A filter's value is written into the statement, not passed as a
 * parameter: each filter is a statement of its own whose generic plan can pick its index (a `kind = $5` plan
 * has to serve 'admin', one row by ux_connections_tenant_admin, and 'user', the tenant's range, alike).
 */
const KIND_SQL: Record<ConnectionKind, string> = { admin: `'admin'`, user: `'user'` };
const STATUS_SQL: Record<ConnectionStatus, string> = { active: `'active'`, reauth_required: `'reauth_required'` };

/**
 * The page statements of a tenant's connections, one per filter shape (at most 18), each a named prepared
 * statement: one page in creation order (created_at, id) after a position, a keyset read on
 * ix_connections_tenant_created (ix_connections_tenant_reauth_created, ux_connections_tenant_user or
 * ux_connections_tenant_admin for their filters), so the cost of a page does not grow with its depth. The first
 * page reads after BEFORE_ALL, so that it shares the deep pages' statement and generic plan.
 */
export class ConnectionPages {
  private readonly statements = new Map<string, { name: string; text: string }>();

  constructor(private readonly rows: EntityRows<ConnectionEntity, (typeof LISTED_PROPERTIES)[number]>) {}

  /** The statement of `filter`'s shape with its values; it answers `limit + 1` rows at most. */
  query(tenantId: string, filter: ConnectionFilter, after: PagePosition | null, limit: number): pg.QueryConfig {
    const shape = `${filter.userId !== undefined ? 'u' : ''}_${filter.kind ?? ''}_${filter.status ?? ''}`;
    let statement = this.statements.get(shape);
    if (!statement) {
      const where = [`c.tenant_id = $1`, `(c.created_at, c.id) > ($2::timestamptz, $3::uuid)`];
      // A user id names a user connection: saying so lets the planner use the unique (tenant_id, user_id) index.
      if (filter.userId !== undefined) where.push(`c.kind = 'user' AND c.user_id = $5`);
      if (filter.kind) where.push(`c.kind = ${KIND_SQL[filter.kind]}`);
      if (filter.status) where.push(`c.status = ${STATUS_SQL[filter.status]}`);
      statement = {
        name: `cws_connections_page${shape}`,
        text: `SELECT ${this.rows.select}, h.last_error_code AS health_code, h.last_error_at AS health_at, c.created_at::text AS created_text
  FROM connections c LEFT JOIN connection_health h ON h.connection_id = c.id
 WHERE ${where.join(' AND ')}
 ORDER BY c.created_at, c.id
 LIMIT $4`,
      };
      this.statements.set(shape, statement);
    }
    const from = after ?? BEFORE_ALL;
    const values: unknown[] = [tenantId, from.createdAt, from.id, limit + 1];
    if (filter.userId !== undefined) values.push(filter.userId);
    return { ...statement, values };
  }

  /** A page statement's rows as listed connections. */
  map(raw: Array<Record<string, unknown>>): PagedConnection[] {
    return raw.map((r) => {
      const created = exactTime(r.created_text as string);
      const connection: ListedConnection = Object.assign(this.rows.map(r), { createdAt: created.at });
      return {
        connection,
        lastError: lastErrorOf(r.health_code as string | null, r.health_at as Date | null),
        position: { createdAt: created.exact, id: connection.id },
      };
    });
  }
}
