import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { EventsRepository } from '../events/events.repository.js';
import type { TokenSet, UpstreamUser } from '../upstream/upstream.types.js';
import { TokenVault } from '../vault/token-vault.service.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';
import type { ConnectionEntity } from './connection.entity.js';
import { ConnectionsRepository, type ConnectedFields } from './connections.repository.js';
import { refreshDueAt, sealTokens } from './token-fields.js';

@Injectable()
export class ConnectionsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: ConnectionsRepository,
    private readonly vault: TokenVault,
    private readonly events: EventsRepository,
    private readonly clock: Clock,
  ) {}

  list(tenantId: string): Promise<ConnectionEntity[]> {
    return this.repo.listForTenant(tenantId);
  }

  async get(tenantId: string, id: string): Promise<ConnectionEntity> {
    const connection = await this.repo.getById(tenantId, id);
    if (!connection) throw new AppError('connection_not_found', 'No such connection.');
    return connection;
  }

  /** Deletes a connection and its tokens; the partner hears of it as connection.deleted. */
  async delete(tenantId: string, id: string): Promise<void> {
    const deleted = await this.repo.transaction(async (m) => {
      const gone = await this.repo.delete(m, tenantId, id);
      if (gone) {
        await this.events.record({ tenantId, source: 'service', type: 'connection.deleted', payload: eventPayload('connection.deleted', gone) }, m);
      }
      return gone;
    });
    if (!deleted) throw new AppError('connection_not_found', 'No such connection.');
  }

  /**
   * Stores the outcome of a completed authorization: a new connection, or new tokens on the owner's
   * existing one (same id). Tokens are sealed with the row id in their AAD, so the id is settled first.
   * Answers the connection's id.
   */
  async saveFromConnect(session: ConnectSessionEntity, tokens: TokenSet, user: UpstreamUser, isAdmin: boolean): Promise<string> {
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + tokens.expiresIn * 1000);
    const fieldsFor = (id: string): ConnectedFields => ({
      upstreamUserId: user.id,
      upstreamEmail: user.email,
      upstreamUsername: user.username,
      isAdmin,
      scopes: tokens.scope ?? session.scopes,
      ...sealTokens(this.vault, id, tokens),
      accessTokenExpiresAt: expiresAt,
      refreshDueAt: refreshDueAt(now, tokens.expiresIn, this.config.refresh.at),
      now,
    });
    return this.repo.transaction(async (m) => {
      let existing = await this.repo.findOwner(session.tenantId, session.kind, session.userId, m);
      if (!existing) {
        const id = randomUUID();
        if (await this.repo.insert(m, session.tenantId, id, session.kind, session.userId, fieldsFor(id))) {
          const created = { id, tenantId: session.tenantId, kind: session.kind, userId: session.userId, upstreamUserId: user.id };
          await this.events.record({ tenantId: session.tenantId, source: 'service', type: 'connection.created', payload: eventPayload('connection.created', created) }, m);
          return id;
        }
        existing = await this.repo.findOwner(session.tenantId, session.kind, session.userId, m);
        if (!existing) throw new Error('connection vanished during a reconnect');
      }
      await this.repo.replaceTokens(m, existing.id, fieldsFor(existing.id));
      if (existing.status === 'reauth_required') {
        await this.events.record({ tenantId: session.tenantId, source: 'service', type: 'connection.recovered', payload: eventPayload('connection.recovered', existing) }, m);
      }
      return existing.id;
    });
  }
}

export function eventPayload(type: string, c: Pick<ConnectionEntity, 'id' | 'tenantId' | 'kind' | 'userId' | 'upstreamUserId'> & { statusReason?: string | null }) {
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
