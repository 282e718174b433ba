import type { EntityManager } from 'typeorm';
import { type EndpointRow, typeMatches } from './endpoint.js';
import { compileEndpointFilter, type EndpointFilter } from './endpoint-filter.js';
import type { FanoutEvent, NewDelivery } from './endpoint-deliveries.repository.js';
import type { EndpointsRepository } from './endpoints.repository.js';

/**
 * The fan-out's decision (docs/endpoints.md): which of a tenant's added endpoints takes which event, by its types and
 * its filter over the delivered body. Compiled filters are kept per endpoint until its row changes.
 */
export class FanoutPlanner {
  private readonly filters = new Map<string, { at: number; filter: EndpointFilter | null }>();

  constructor(private readonly endpoints: EndpointsRepository) {}

  /** Which endpoint takes which event: its types, its filter over the delivered body; a disabled one records it `missed`. */
  async plan(m: EntityManager, events: FanoutEvent[]): Promise<NewDelivery[]> {
    if (events.length === 0) return [];
    const all = await this.endpoints.listOfTenants(m, [...new Set(events.map((e) => e.tenantId))]);
    const byTenant = new Map<string, EndpointRow[]>();
    for (const e of all) byTenant.set(e.tenantId, [...(byTenant.get(e.tenantId) ?? []), e]);
    const out: NewDelivery[] = [];
    for (const ev of events) {
      const about = ev.type.startsWith('endpoint.') ? endpointIdOf(ev.payload) : null;
      let body: unknown = undefined;
      for (const ep of byTenant.get(ev.tenantId) ?? []) {
        if (ep.id === about || ep.createdAt > ev.receivedAt || !typeMatches(ep.eventTypes, ev.type)) continue;
        const filter = this.filterOf(ep);
        if (filter) {
          body ??= { type: ev.type, timestamp: ev.receivedAt.toISOString(), data: ev.payload };
          if (!filter.matches(body)) continue;
        }
        out.push({
          endpointId: ep.id,
          eventId: ev.id,
          tenantId: ev.tenantId,
          receivedAt: ev.receivedAt,
          state: ep.disabled ? 'missed' : 'pending',
        });
      }
    }
    return out;
  }

  private filterOf(ep: EndpointRow): EndpointFilter | null {
    const at = ep.updatedAt.getTime();
    const cached = this.filters.get(ep.id);
    if (cached && cached.at === at) return cached.filter;
    let filter: EndpointFilter | null = null;
    if (ep.filter !== null) {
      const compiled = compileEndpointFilter(ep.filter);
      // A stored filter was checked when written; one that no longer compiles takes nothing rather than everything.
      filter = compiled.ok ? compiled.filter : { matches: () => false };
    }
    this.filters.set(ep.id, { at, filter });
    return filter;
  }
}

function endpointIdOf(payload: unknown): string | null {
  const id = (payload as { endpointId?: unknown } | null)?.endpointId;
  return typeof id === 'string' ? id : null;
}
