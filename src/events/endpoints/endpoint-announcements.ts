import { Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { AuditAction } from '../../audit/audit-entry.js';
import type { AuditService } from '../../audit/audit.service.js';
import type { EventsRepository } from '../events.repository.js';
import { type EndpointRow, FIRST_ENDPOINT_ID } from './endpoint.js';
import type { EndpointDeliveriesRepository } from './endpoint-deliveries.repository.js';
import type { ClockChange, EndpointsRepository } from './endpoints.repository.js';

type EndpointEventType = Extract<AuditAction, 'endpoint.failing' | 'endpoint.disabled' | 'endpoint.recovered'>;

/**
 * What an endpoint's change of health tells the tenant (docs/endpoints.md): an `endpoint.*` event for its endpoints
 * that take it and an audit row (actor `service`), always in the caller's transaction, so the change and its
 * announcement commit together or not at all.
 */
export class EndpointAnnouncements {
  private readonly logger = new Logger('EndpointDelivery');

  constructor(
    private readonly endpoints: EndpointsRepository,
    private readonly deliveries: EndpointDeliveriesRepository,
    private readonly events: EventsRepository,
    private readonly audit: AuditService,
  ) {}

  /** An added endpoint's warning, disable or recovery, in the transaction that records the attempt; a disable also turns what was still waiting into `missed`. */
  async clockChanged(m: EntityManager, ep: EndpointRow, change: ClockChange): Promise<void> {
    if (change.kind === 'none') return;
    const type = change.kind === 'failing' ? 'endpoint.failing' : change.kind === 'disabled' ? 'endpoint.disabled' : 'endpoint.recovered';
    const payload: Record<string, unknown> = { endpointId: ep.id, description: ep.description };
    if (change.kind === 'failing') Object.assign(payload, { failingSince: change.since.toISOString(), failingHours: change.hours });
    if (change.kind === 'disabled') {
      Object.assign(payload, { reason: change.reason, failingSince: change.since?.toISOString() ?? null });
      await this.deliveries.markPendingMissed(m, ep.id);
    }
    await this.announce(m, ep.tenantId, ep.id, type, payload);
    this.logger.warn({ endpointId: ep.id, tenantId: ep.tenantId, change: change.kind }, `event endpoint: ${type}`);
  }

  /** eventsTargetUrl answered 410 and is being disabled (in `m`'s transaction): told when the tenant has added endpoints. */
  async firstGone(m: EntityManager, tenantId: string): Promise<void> {
    if ((await this.endpoints.countOfTenantIn(m, tenantId)) === 0) return;
    const payload = { endpointId: FIRST_ENDPOINT_ID, description: 'eventsTargetUrl', reason: 'gone', failingSince: null };
    await this.announce(m, tenantId, FIRST_ENDPOINT_ID, 'endpoint.disabled', payload);
  }

  private async announce(
    m: EntityManager,
    tenantId: string,
    endpointId: string,
    type: EndpointEventType,
    payload: Record<string, unknown>,
  ): Promise<void> {
    await this.events.record({ tenantId, source: 'service', type, payload }, m);
    await this.audit.record(
      {
        action: type,
        actor: { kind: 'service', id: null },
        tenantId,
        target: `endpoints/${endpointId}`,
        requestId: null,
        outcome: 'success',
      },
      m,
    );
  }
}
