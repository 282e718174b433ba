import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { EventDeliveryService } from './event-delivery.service.js';
import { type DeliveryAttempt, type DeliveryState, EventsRepository, type StoredEvent } from './events.repository.js';

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;
/** At most this many events are queued by one bulk redelivery call. */
export const REDELIVER_PER_CALL = 1000;
/** A bulk redelivery never leaves a tenant with more than this many events waiting for delivery. */
export const REDELIVER_MAX_PENDING = 5000;

export type RedeliverState = 'dead' | 'delivered' | 'any';

const STATES_OF: Record<RedeliverState, readonly DeliveryState[]> = {
  dead: ['dead'],
  delivered: ['delivered'],
  any: ['dead', 'delivered', 'no_target'],
};

@Injectable()
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly tenants: TenantsService,
    private readonly delivery: EventDeliveryService,
  ) {}

  /** Every delivery attempt of one of the tenant's events, oldest first. */
  async attempts(tenantId: string, eventId: string): Promise<DeliveryAttempt[]> {
    await this.tenants.get(tenantId);
    const attempts = await this.events.listAttempts(tenantId, eventId);
    if (!attempts) throw eventNotFound();
    return attempts;
  }

  /** Delivers one event again, under its own id (webhook-id), whatever its state; one on its way already stays as it is. */
  async redeliver(tenantId: string, eventId: string): Promise<void> {
    await this.requireTarget(tenantId);
    const queued = await this.events.redeliverOne(tenantId, eventId);
    if (queued === null) throw eventNotFound();
    if (queued) this.delivery.kick();
  }

  /** Delivers again the events received since `since` in `state` (bounded: see REDELIVER_PER_CALL and REDELIVER_MAX_PENDING). */
  async redeliverSince(tenantId: string, since: Date, state: RedeliverState): Promise<{ queued: number; remaining: number }> {
    await this.requireTarget(tenantId);
    const { queued, left } = await this.events.redeliverSince(tenantId, since, STATES_OF[state], REDELIVER_PER_CALL, REDELIVER_MAX_PENDING);
    if (queued > 0) this.delivery.kick();
    return { queued, remaining: left };
  }

  private async requireTarget(tenantId: string): Promise<void> {
    const tenant = await this.tenants.get(tenantId);
    if (!tenant.eventsTargetUrl) throw new AppError('conflict', 'The tenant has no eventsTargetUrl: there is nowhere to deliver to.');
    if (tenant.eventsTargetDisabled)
      throw new AppError('conflict', 'The events target answered 410 Gone and is disabled: set eventsTargetUrl again first.');
  }

  /** A page of the tenant's events in the order they were recorded; `next` continues after the last one. */
  async list(
    tenantId: string,
    after: string | undefined,
    limit: string | undefined,
  ): Promise<{ events: StoredEvent[]; next: string | null }> {
    const afterSeq = after === undefined ? 0 : decodeCursor(after);
    const size = limit === undefined ? DEFAULT_PAGE : Number(limit);
    if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE)
      throw new AppError('validation_failed', `limit must be an integer between 1 and ${MAX_PAGE}.`);
    await this.tenants.get(tenantId);
    const events = await this.events.listAfter(tenantId, afterSeq, size);
    const last = events.at(-1);
    return { events, next: last ? encodeCursor(last.seq) : (after ?? null) };
  }
}

export function encodeCursor(seq: number): string {
  return Buffer.from(`s${seq}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): number {
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const match = /^s(\d{1,15})$/.exec(text);
  if (!match || encodeCursor(Number(match[1])) !== cursor)
    throw new AppError('validation_failed', 'after is not a cursor this service gave out.');
  return Number(match[1]);
}

function eventNotFound(): AppError {
  return new AppError('event_not_found', 'No such event.');
}
