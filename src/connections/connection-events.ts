import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { EventsRepository } from '../events/events.repository.js';
import type { ConnectionEntity } from './store/connection.entity.js';

/** The `connection.*` events the partner hears of (API.md section 8). */
export type ConnectionEventType = 'connection.created' | 'connection.recovered' | 'connection.deleted' | 'connection.reauth_required';

/** What an event tells of its connection. */
export type EventConnection = Pick<ConnectionEntity, 'id' | 'tenantId' | 'kind' | 'userId' | 'upstreamUserId'> & {
  statusReason?: string | null;
};

/**
 * A connection's lifecycle as the partner hears of it: each event is recorded in the transaction of the change it
 * tells of (`manager`), so the partner never hears of a change that did not commit, nor misses one that did.
 */
@Injectable()
export class ConnectionEvents {
  constructor(private readonly events: EventsRepository) {}

  record(type: ConnectionEventType, c: EventConnection, manager: EntityManager): Promise<void> {
    return this.events.record({ tenantId: c.tenantId, source: 'service', type, payload: eventPayload(type, c), userId: c.userId }, manager);
  }
}

function eventPayload(type: ConnectionEventType, c: EventConnection) {
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
