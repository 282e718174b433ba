import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { AuditContext } from '../audit/audit-context.js';
import { AuditService } from '../audit/audit.service.js';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { EnvironmentName } from '../config/app-config.js';
import type { EntityManager } from 'typeorm';
import { TenantsService } from '../tenants/tenants.service.js';
import { EventsRepository } from '../events/events.repository.js';
import type { TokenSet, UpstreamUser } from '../upstream/upstream.types.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';
import { ConnectionHealthRepository, type ConnectionWithHealth, type RenewalRecord } from './store/connection-health.repository.js';
import type { ConnectionFilter, PagedConnection, PagePosition } from './store/connection-paging.js';
import type { ConnectionEntity } from './store/connection.entity.js';
import { ConnectionsRepository, type ConnectedFields } from './store/connections.repository.js';
import { RenewalLeaseRepository } from './store/renewal-lease.repository.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { ConnectionTokens } from './token-fields.js';
import { sha256 } from '../common/hash.js';

@Injectable()
export class ConnectionsService {
  constructor(
    private readonly repo: ConnectionsRepository,
    private readonly tokens: ConnectionTokens,
    private readonly events: EventsRepository,
    private readonly clock: Clock,
    private readonly tenants: TenantsService,
    private readonly audit: AuditService,
    private readonly sessions: ConnectSessionsRepository,
    private readonly health: ConnectionHealthRepository,
    private readonly leases: RenewalLeaseRepository,
  ) {}

  /** A page of the tenant's connections in creation order; `next` (null on the last page) continues after it. */
  async list(tenantId: string, q: ConnectionListQuery): Promise<{ connections: PagedConnection[]; next: string | null }> {
    const limit = q.limit ?? DEFAULT_CONNECTIONS_PAGE;
    const after = q.after === undefined ? null : decodeConnectionCursor(tenantId, q.after);
    const tenant = await this.tenants.get(tenantId);
    // A tenant's connections all live in its environment.
    if (q.environment !== undefined && q.environment !== tenant.environment) return { connections: [], next: null };
    const rows = await this.repo.listPage(tenantId, { userId: q.userId, kind: q.kind, status: q.status }, after, limit);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return { connections: page, next: rows.length > limit && last ? encodeConnectionCursor(tenantId, last.position) : null };
  }

  async get(tenantId: string, id: string): Promise<ConnectionWithHealth> {
    const found = await this.repo.getWithHealth(tenantId, id);
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
      const gone = await this.repo.delete(m, tenantId, id);
      if (gone) {
        await this.events.record(
          {
            tenantId,
            source: 'service',
            type: 'connection.deleted',
            payload: eventPayload('connection.deleted', gone),
            userId: gone.userId,
          },
          m,
        );
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
      if (c)
        await this.events.record(
          {
            tenantId: c.tenantId,
            source: 'service',
            type: 'connection.reauth_required',
            payload: eventPayload('connection.reauth_required', c),
            userId: c.userId,
          },
          m,
        );
      return c;
    });
  }

  /**
   * Stores the outcome of a completed authorization: a new connection, or new tokens on the owner's
   * existing one (same id). Tokens are sealed with the row id in their AAD, so the id is settled first.
   * Answers the connection's id. Audited in the same transaction, the connect session as the actor.
   */
  async saveFromConnect(
    session: ConnectSessionEntity,
    tokens: TokenSet,
    user: UpstreamUser,
    isAdmin: boolean,
    requestId: string,
  ): Promise<string> {
    const now = this.clock.now();
    const fieldsFor = (id: string): ConnectedFields => ({
      upstreamUserId: user.id,
      upstreamEmail: user.email,
      upstreamUsername: user.username,
      isAdmin,
      scopes: tokens.scope ?? session.scopes,
      ...this.tokens.fields(id, tokens, now),
    });
    const audited = (action: 'connection.created' | 'connection.reconnected', id: string, m: EntityManager) =>
      this.audit.record(
        {
          action,
          actor: { kind: 'connect_session', id: session.id },
          tenantId: session.tenantId,
          target: `connections/${id}`,
          userId: session.userId,
          requestId,
          outcome: 'success',
        },
        m,
      );
    return this.repo.transaction(async (m) => {
      if (session.kind === 'user' && session.userId !== null) {
        // An erasure of this user that ran since the state was consumed deleted the session: nothing is stored.
        await this.repo.lockUser(m, session.tenantId, session.userId);
        if (!(await this.sessions.existsIn(m, session.id)))
          throw new AppError('connect_state_invalid', 'The connect session is gone (its user was erased). Start the connection again.');
      }
      let existing = await this.repo.findOwner(session.tenantId, session.kind, session.userId, m);
      if (!existing) {
        const id = randomUUID();
        if (await this.repo.insert(m, session.tenantId, id, session.kind, session.userId, fieldsFor(id))) {
          const created = { id, tenantId: session.tenantId, kind: session.kind, userId: session.userId, upstreamUserId: user.id };
          await this.events.record(
            {
              tenantId: session.tenantId,
              source: 'service',
              type: 'connection.created',
              payload: eventPayload('connection.created', created),
              userId: session.userId,
            },
            m,
          );
          await audited('connection.created', id, m);
          return id;
        }
        existing = await this.repo.findOwner(session.tenantId, session.kind, session.userId, m);
        if (!existing) throw new Error('connection vanished during a reconnect');
      }
      await this.repo.replaceTokens(m, existing.id, fieldsFor(existing.id));
      await audited('connection.reconnected', existing.id, m);
      if (existing.status === 'reauth_required') {
        await this.events.record(
          {
            tenantId: session.tenantId,
            source: 'service',
            type: 'connection.recovered',
            payload: eventPayload('connection.recovered', existing),
            userId: existing.userId,
          },
          m,
        );
      }
      return existing.id;
    });
  }
}

function eventPayload(
  type: string,
  c: Pick<ConnectionEntity, 'id' | 'tenantId' | 'kind' | 'userId' | 'upstreamUserId'> & { statusReason?: string | null },
) {
  return {
    type,
    connectionId: c.id,
    tenantId: c.tenantId,
    kind: c.kind,
    userId: c.userId,
    upstreamUserId: c.upstreamUserId,
    ...(c.statusReason ? { reason: c.statusReason } : {}),
  };
}

export const DEFAULT_CONNECTIONS_PAGE = 100;
export const MAX_CONNECTIONS_PAGE = 500;

export interface ConnectionListQuery extends ConnectionFilter {
  limit?: number;
  after?: string;
  environment?: EnvironmentName;
}

const CURSOR_VERSION = 'c1';
const CURSOR_TEXT =
  /^c1\|(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\|([A-Za-z0-9_-]{16})$/;

/**
 * The `next` cursor: the position of a page's last row, with a check value over it and the tenant. It is
 * opaque to callers; the check catches a cursor that was cut, altered or taken from another tenant (it is not
 * a secret: forging one only starts the caller's own listing somewhere else).
 */
export function encodeConnectionCursor(tenantId: string, p: PagePosition): string {
  return Buffer.from(`${CURSOR_VERSION}|${p.createdAt}|${p.id}|${cursorCheck(tenantId, p)}`, 'utf8').toString('base64url');
}

export function decodeConnectionCursor(tenantId: string, cursor: string): PagePosition {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = CURSOR_TEXT.exec(text);
  const position = m ? { createdAt: m[1], id: m[2] } : null;
  if (
    !m ||
    !position ||
    m[3] !== cursorCheck(tenantId, position) ||
    encodeConnectionCursor(tenantId, position) !== cursor ||
    Number.isNaN(Date.parse(position.createdAt))
  ) {
    throw new AppError('validation_failed', 'after is not a cursor this service gave out for this listing.');
  }
  return position;
}

function cursorCheck(tenantId: string, p: PagePosition): string {
  return sha256(`${tenantId}|${p.createdAt}|${p.id}`).subarray(0, 12).toString('base64url');
}
