import type { Repository } from 'typeorm';
import type { ConnectionEntity, ConnectionKind, ConnectionStatus } from './connection.entity.js';
import { type ConnectionWithHealth, lastErrorOf } from './connection-health.repository.js';

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

/** A listed connection, with the position that a page starting after it needs. */
export type PagedConnection = ConnectionWithHealth & { position: PagePosition };

/**
 * One page of a tenant's connections in creation order (created_at, id), after `after`: a keyset read on
 * ix_connections_tenant_created, so the cost of a page does not grow with its depth. Answers `limit + 1`
 * rows at most, each with the position that a page starting after it needs.
 */
export async function connectionsPage(
  repo: Repository<ConnectionEntity>,
  tenantId: string,
  filter: ConnectionFilter,
  after: PagePosition | null,
  limit: number,
): Promise<PagedConnection[]> {
  const q = repo
    .createQueryBuilder('c')
    .leftJoin('connection_health', 'h', 'h.connection_id = c.id')
    .addSelect('h.last_error_code', 'health_code')
    .addSelect('h.last_error_at', 'health_at')
    .addSelect(`to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, 'position_at')
    .where('c.tenant_id = :tenantId', { tenantId });
  if (after)
    q.andWhere('(c.created_at, c.id) > (CAST(:afterAt AS timestamptz), CAST(:afterId AS uuid))', {
      afterAt: after.createdAt,
      afterId: after.id,
    });
  // A user id names a user connection: saying so lets the planner use the unique (tenant_id, user_id) index.
  if (filter.userId !== undefined) q.andWhere(`c.kind = 'user' AND c.user_id = :userId`, { userId: filter.userId });
  if (filter.kind) q.andWhere('c.kind = :kind', { kind: filter.kind });
  if (filter.status) q.andWhere('c.status = :status', { status: filter.status });
  const { entities, raw } = await q
    .orderBy('c.created_at', 'ASC')
    .addOrderBy('c.id', 'ASC')
    .limit(limit + 1)
    .getRawAndEntities<{ c_id: string; health_code: string | null; health_at: Date | null; position_at: string }>();
  const extra = new Map(raw.map((r) => [r.c_id, r]));
  return entities.map((connection) => {
    const r = extra.get(connection.id)!;
    return { connection, lastError: lastErrorOf(r.health_code, r.health_at), position: { createdAt: r.position_at, id: connection.id } };
  });
}
