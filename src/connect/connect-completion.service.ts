import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuditService } from '../audit/audit.service.js';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { ConnectionEvents } from '../connections/connection-events.js';
import { ConnectionsRepository, type ConnectedFields } from '../connections/store/connections.repository.js';
import { ConnectionTokens } from '../connections/connection-tokens.js';
import type { TokenSet, UpstreamUser } from '../upstream/upstream.types.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';

/** The end of a connect: what a completed authorization leaves in the connections table. */
@Injectable()
export class ConnectCompletionService {
  constructor(
    private readonly repo: ConnectionsRepository,
    private readonly tokens: ConnectionTokens,
    private readonly events: ConnectionEvents,
    private readonly audit: AuditService,
    private readonly sessions: ConnectSessionsRepository,
    private readonly clock: Clock,
  ) {}

  /**
   * Stores the outcome of a completed authorization: a new connection, or new tokens on the owner's
   * existing one (same id). Tokens are sealed with the row id in their AAD, so the id is settled first.
   * Answers the connection's id. Audited in the same transaction, the connect session as the actor.
   */
  async save(session: ConnectSessionEntity, tokens: TokenSet, user: UpstreamUser, isAdmin: boolean, requestId: string): Promise<string> {
    const now = this.clock.now();
    const fieldsFor = async (id: string): Promise<ConnectedFields> => ({
      upstreamUserId: user.id,
      upstreamEmail: user.email,
      upstreamUsername: user.username,
      isAdmin,
      scopes: tokens.scope ?? session.scopes,
      ...(await this.tokens.fields({ id, tenantId: session.tenantId }, tokens, now)),
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
        if (await this.repo.insert(m, session.tenantId, id, session.kind, session.userId, await fieldsFor(id))) {
          const created = { id, tenantId: session.tenantId, kind: session.kind, userId: session.userId, upstreamUserId: user.id };
          await this.events.record('connection.created', created, m);
          await audited('connection.created', id, m);
          return id;
        }
        existing = await this.repo.findOwner(session.tenantId, session.kind, session.userId, m);
        if (!existing) throw new Error('connection vanished during a reconnect');
      }
      await this.repo.replaceTokens(m, existing.id, await fieldsFor(existing.id));
      await audited('connection.reconnected', existing.id, m);
      if (existing.status === 'reauth_required') await this.events.record('connection.recovered', existing, m);
      return existing.id;
    });
  }
}
