import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { ConnectSessionsRepository } from '../connections/connect-sessions.repository.js';
import { ConnectionsRepository } from '../connections/connections.repository.js';
import { EventDeliveryService } from '../events/event-delivery.service.js';
import { EventsRemoval } from '../events/events-removal.repository.js';
import { EventsRepository } from '../events/events.repository.js';
import { TenantsService } from '../tenants/tenants.service.js';

export interface Erased {
  connections: number;
  connectSessions: number;
  events: number;
}

/**
 * Erasure of one of the partner's end users (API.md section 6): their connections with the sealed tokens and
 * renewal history, their connect sessions, and the events attributed to them with their attempts, in one
 * transaction, and a `user.erased` event that names no one. The upstream's spec shows no token revocation, so
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
  ) {}

  async erase(tenantId: string, userId: string): Promise<Erased> {
    await this.tenants.get(tenantId);
    const erased = await this.connections.transaction(async (m) => {
      await this.connections.lockUser(m, tenantId, userId);
      const done: Erased = {
        connections: await this.connections.deleteUser(m, tenantId, userId),
        connectSessions: await this.sessions.deleteUser(m, tenantId, userId),
        events: await this.removal.removeUser(m, tenantId, userId),
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
      return done;
    });
    this.delivery.kick();
    return erased;
  }
}
