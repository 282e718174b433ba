import { Injectable } from '@nestjs/common';
import type { AuditContext } from '../audit/audit-context.js';
import { AgentSessionsRepository } from '../agents/agent-sessions.repository.js';
import { AuditService } from '../audit/audit.service.js';
import { Clock } from '../common/clock.js';
import { ConnectSessionsRepository } from '../connect/connect-sessions.repository.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { EventDeliveryService } from '../events/event-delivery.service.js';
import { EventsRemoval } from '../events/events-removal.repository.js';
import { EventsRepository } from '../events/events.repository.js';
import { TenantsService } from '../tenants/tenants.service.js';

export interface Erased {
  connections: number;
  connectSessions: number;
  events: number;
  agentSessions: number;
}

/**
 * Erasure of one of the partner's end users (API.md section 6): their connections with the sealed tokens and
 * renewal history, their connect sessions and agent sessions, and the events attributed to them with their attempts, in one
 * transaction, and a `user.erased` event that names no one; the audit trail forgets the user's identifiers and
 * records the erasure (without them) in the same transaction. The upstream's spec shows no token revocation, so
 * none is sent: the tokens are destroyed here.
 *
 * Against a connect of the same user completing at the same moment: both take the user's lock
 * (ConnectionsRepository.lockUser). A connect that commits first is erased here; one that comes after finds its
 * session deleted and stores nothing.
 */
@Injectable()
export class UserErasureService {
  constructor(
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsRepository,
    private readonly sessions: ConnectSessionsRepository,
    private readonly removal: EventsRemoval,
    private readonly events: EventsRepository,
    private readonly delivery: EventDeliveryService,
    private readonly clock: Clock,
    private readonly audit: AuditService,
    private readonly agentSessions: AgentSessionsRepository,
  ) {}

  async erase(tenantId: string, userId: string, by: AuditContext): Promise<Erased> {
    await this.tenants.get(tenantId);
    const erased = await this.connections.transaction(async (m) => {
      await this.connections.lockUser(m, tenantId, userId);
      const done: Erased = {
        connections: await this.connections.deleteOfUser(m, tenantId, userId),
        connectSessions: await this.sessions.deleteOfUser(m, tenantId, userId),
        events: await this.removal.removeOfUser(m, tenantId, userId),
        agentSessions: await this.agentSessions.deleteOfUser(m, tenantId, userId),
      };
      // What was removed, in counts: never the user's id, which is the partner's personal data about them.
      await this.events.record(
        {
          tenantId,
          source: 'service',
          type: 'user.erased',
          payload: { type: 'user.erased', tenantId, erasedAt: this.clock.now().toISOString(), ...done },
        },
        m,
      );
      // The trail keeps the fact of the erasure and forgets whom it was about (API.md section 4).
      await this.audit.forgetUser(tenantId, userId, m);
      await this.audit.record({ action: 'user.erased', ...by, tenantId, target: null, userId: null, outcome: 'success' }, m);
      return done;
    });
    this.delivery.kick();
    return erased;
  }
}
