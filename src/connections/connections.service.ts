import { Injectable } from '@nestjs/common';
import type { AuditContext } from '../audit/audit-context.js';
import { AuditService } from '../audit/audit.service.js';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { EXACT_TIME, KeysetCursor, pageOf, UUID_TEXT } from '../common/page-cursor.js';
import type { EnvironmentName } from '../config/environment-config.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { ConnectionHealthRepository, type ConnectionWithHealth, type RenewalRecord } from './store/connection-health.repository.js';
import type { ConnectionFilter, PagedConnection, PagePosition } from './store/connection-paging.js';
import type { ConnectionEntity } from './store/connection.entity.js';
import { ConnectionsRepository } from './store/connections.repository.js';
import { RenewalLeaseRepository } from './store/renewal-lease.repository.js';
import { ConnectionEvents } from './connection-events.js';

@Injectable()
export class ConnectionsService {
  constructor(
    private readonly repo: ConnectionsRepository,
    private readonly events: ConnectionEvents,
    private readonly clock: Clock,
    private readonly tenants: TenantsService,
    private readonly audit: AuditService,
    private readonly health: ConnectionHealthRepository,
    private readonly leases: RenewalLeaseRepository,
  ) {}

  /** A page of the tenant's connections in creation order; `next` (null on the last page) continues after it. */
  async list(tenantId: string, q: ConnectionListQuery): Promise<{ connections: PagedConnection[]; next: string | null }> {
    const limit = q.limit ?? DEFAULT_CONNECTIONS_PAGE;
    const after = q.after === undefined ? null : CONNECTION_CURSOR.decode(tenantId, q.after);
    const tenant = await this.tenants.get(tenantId);
    // A tenant's connections all live in its environment.
    if (q.environment !== undefined && q.environment !== tenant.environment) return { connections: [], next: null };
    const rows = await this.repo.listPage(tenantId, { userId: q.userId, kind: q.kind, status: q.status }, after, limit);
    const page = pageOf(rows, limit, (last) => CONNECTION_CURSOR.encode(tenantId, last.position));
    return { connections: page.items, next: page.next };
  }

  async get(tenantId: string, id: string): Promise<ConnectionWithHealth> {
    const found = await this.repo.findInTenantWithHealth(tenantId, id);
    if (!found) throw new AppError('connection_not_found', 'No such connection.');
    return found;
  }

  /** The connection's last renewals, newest first. */
  async renewals(tenantId: string, id: string): Promise<RenewalRecord[]> {
    const history = await this.health.renewalHistory(tenantId, id);
    if (!history) throw new AppError('connection_not_found', 'No such connection.');
    return history;
  }

  /** Deletes a connection and its tokens; the partner hears of it as connection.deleted, the audit trail in the same transaction. */
  async delete(tenantId: string, id: string, by: AuditContext): Promise<void> {
    const deleted = await this.repo.transaction(async (m) => {
      const gone = await this.repo.deleteInTenant(m, tenantId, id);
      if (gone) {
        await this.events.record('connection.deleted', gone, m);
        await this.audit.record(
          { action: 'connection.deleted', ...by, tenantId, target: `connections/${id}`, userId: gone.userId, outcome: 'success' },
          m,
        );
      }
      return gone;
    });
    if (!deleted) {
      await this.audit.recordAfter({ action: 'connection.deleted', ...by, tenantId, target: `connections/${id}`, outcome: 'failure' });
      throw new AppError('connection_not_found', 'No such connection.');
    }
  }

  /**
   * The upstream refused the refresh token of the renewal that `owner` holds the lease of, on `version`:
   * the connection needs its user again, and the partner hears of it in the same transaction. Null when
   * the row moved meanwhile (a reconnect replaced the tokens): that is a lost race, not a revocation.
   */
  markReauthRequired(id: string, owner: string, version: number, reason: string): Promise<ConnectionEntity | null> {
    return this.repo.transaction(async (m) => {
      const c = await this.leases.markReauthRequired(m, id, owner, version, reason, this.clock.now());
      if (c) await this.events.record('connection.reauth_required', c, m);
      return c;
    });
  }

  /**
   * A stored token of the connection (as of `version`) does not open: the connection needs its user again,
   * and the partner hears of it (`reason`) in the same transaction. Null when the row moved meanwhile.
   */
  markTokensUnreadable(id: string, version: number, reason: string): Promise<ConnectionEntity | null> {
    return this.repo.transaction(async (m) => {
      const c = await this.leases.markTokensUnreadable(m, id, version, reason, this.clock.now());
      if (c) await this.events.record('connection.reauth_required', c, m);
      return c;
    });
  }
}

export const DEFAULT_CONNECTIONS_PAGE = 100;
export const MAX_CONNECTIONS_PAGE = 500;

export interface ConnectionListQuery extends ConnectionFilter {
  limit?: number;
  after?: string;
  environment?: EnvironmentName;
}

/**
 * The `next` cursor: the position of a page's last row, checked against the tenant (`KeysetCursor`): a cursor that
 * was cut, altered or taken from another tenant is refused.
 */
export const CONNECTION_CURSOR = new KeysetCursor<PagePosition>('c1', { createdAt: EXACT_TIME, id: UUID_TEXT });
