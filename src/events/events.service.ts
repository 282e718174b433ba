import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { EventsRepository, type StoredEvent } from './events.repository.js';

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;

@Injectable()
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly tenants: TenantsService,
  ) {}

  /** A page of the tenant's events in the order they were recorded; `next` continues after the last one. */
  async list(tenantId: string, after: string | undefined, limit: string | undefined): Promise<{ events: StoredEvent[]; next: string | null }> {
    const afterSeq = after === undefined ? 0 : decodeCursor(after);
    const size = limit === undefined ? DEFAULT_PAGE : Number(limit);
    if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE) throw new AppError('validation_failed', `limit must be an integer between 1 and ${MAX_PAGE}.`);
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
  if (!match || encodeCursor(Number(match[1])) !== cursor) throw new AppError('validation_failed', 'after is not a cursor this service gave out.');
  return Number(match[1]);
}
