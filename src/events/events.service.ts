import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { cursorOf, textOfCursor } from '../common/page-cursor.js';
import type { TenantEntity } from '../tenants/tenant.entity.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { EventDeliveryService } from './event-delivery.service.js';
import { type DeliveryAttempt, EventDeliveryRepository } from './event-delivery.repository.js';
import { EventRedeliveryRepository } from './event-redelivery.repository.js';
import { type DeliveryState, type EventPosition, EventsRepository, type StoredEvent } from './events.repository.js';

export const DEFAULT_EVENTS_PAGE = 50;
export const MAX_EVENTS_PAGE = 500;
/** At most this many events are queued by one bulk redelivery call. */
export const REDELIVER_PER_CALL = 1000;
/** A bulk redelivery never leaves a tenant with more than this many events waiting for delivery. */
export const REDELIVER_MAX_PENDING = 5000;

/** `missed` (stored while there was no target, or it was disabled) is for the first event endpoint's redelivery (docs/endpoints.md). */
export type RedeliverState = 'dead' | 'delivered' | 'any' | 'missed';

const STATES_OF: Record<RedeliverState, readonly DeliveryState[]> = {
  dead: ['dead'],
  delivered: ['delivered'],
  any: ['dead', 'delivered', 'no_target'],
  missed: ['no_target'],
};

@Injectable()
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly tenants: TenantsService,
    private readonly delivery: EventDeliveryService,
    private readonly deliveries: EventDeliveryRepository,
    private readonly redeliveries: EventRedeliveryRepository,
  ) {}

  /** Every delivery attempt of one of the tenant's events, oldest first. */
  async attempts(tenantId: string, eventId: string): Promise<DeliveryAttempt[]> {
    const tenant = await this.tenants.get(tenantId);
    const attempts = await this.deliveries.listAttempts(tenantId, eventId, this.tenants.keptSince(tenant));
    if (!attempts) throw eventNotFound();
    return attempts;
  }

  /**
   * Delivers one event again, under its own id (webhook-id), whatever its state; one on its way already stays as
   * it is. One past the tenant's window is `event_expired`, whether or not its row is removed yet.
   */
  async redeliver(tenantId: string, eventId: string): Promise<void> {
    const tenant = await this.requireTarget(tenantId);
    const outcome = await this.redeliveries.redeliverOne(tenantId, eventId, this.tenants.keptSince(tenant));
    if (outcome === 'unknown') throw eventNotFound();
    if (outcome === 'expired')
      throw new AppError('event_expired', `The event is older than the tenant's retention (${this.tenants.retentionDaysOf(tenant)} days).`);
    if (outcome === 'queued') this.delivery.kick();
  }

  /** Delivers again the events received since `since` in `state` (bounded: see REDELIVER_PER_CALL and REDELIVER_MAX_PENDING). */
  async redeliverSince(tenantId: string, since: Date, state: RedeliverState): Promise<{ queued: number; remaining: number }> {
    const tenant = await this.requireTarget(tenantId);
    const { queued, left } = await this.redeliveries.redeliverSince(
      tenantId,
      since,
      STATES_OF[state],
      REDELIVER_PER_CALL,
      REDELIVER_MAX_PENDING,
      this.tenants.keptSince(tenant),
    );
    if (queued > 0) this.delivery.kick();
    return { queued, remaining: left };
  }

  private async requireTarget(tenantId: string): Promise<TenantEntity> {
    const tenant = await this.tenants.get(tenantId);
    if (!tenant.eventsTargetUrl) throw new AppError('conflict', 'The tenant has no eventsTargetUrl: there is nowhere to deliver to.');
    if (tenant.eventsTargetDisabled)
      throw new AppError('conflict', 'The events target answered 410 Gone and is disabled: set eventsTargetUrl again first.');
    return tenant;
  }

  /** A page of the tenant's events in the order they were recorded; `next` continues after the last one. */
  async list(
    tenantId: string,
    after: string | undefined,
    limit: number | undefined,
  ): Promise<{ events: StoredEvent[]; next: string | null }> {
    const from = after === undefined ? START : decodeEventCursor(after);
    const tenant = await this.tenants.get(tenantId);
    const events = await this.events.listAfter(tenantId, from, limit ?? DEFAULT_EVENTS_PAGE, this.tenants.keptSince(tenant));
    const last = events.at(-1);
    return { events, next: last ? encodeEventCursor(last) : (after ?? null) };
  }
}

const START: EventPosition = { writerXid: '0', seq: 0 };

/** The cursor of a position: base64url of `x<writer xid>.<seq>`. */
export function encodeEventCursor(at: EventPosition): string {
  return cursorOf(`x${at.writerXid}.${at.seq}`);
}

/**
 * The position a cursor names. A cursor of the earlier form (`s<seq>`, given out before events carried
 * their writer) is the position of that seq among the rows older than the column (writer xid 0).
 */
export function decodeEventCursor(cursor: string): EventPosition {
  const text = textOfCursor(cursor, 64);
  const match = /^(?:x(\d{1,20})\.|s)(\d{1,15})$/.exec(text ?? '');
  const writerXid = match?.[1] === undefined ? '0' : BigInt(match[1]).toString();
  const at = { writerXid, seq: Number(match?.[2]) };
  // Only the exact text this service writes: no leading zeros, no xid past 64 bits.
  const canonical = match?.[1] === undefined ? `s${at.seq}` : `x${writerXid}.${at.seq}`;
  if (!match || BigInt(writerXid) >= 2n ** 64n || canonical !== text)
    throw new AppError('validation_failed', 'after is not a cursor this service gave out.');
  return at;
}

function eventNotFound(): AppError {
  return new AppError('event_not_found', 'No such event.');
}
