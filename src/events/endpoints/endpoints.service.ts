import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../../common/app-error.js';
import { Clock } from '../../common/clock.js';
import { targetPolicy, targetProblem, type TargetPolicy } from '../../common/target-policy.js';
import type { AppConfig } from '../../config/app-config.js';
import { APP_CONFIG } from '../../config/config.module.js';
import type { TenantEntity } from '../../tenants/tenant.entity.js';
import { TenantsService } from '../../tenants/tenants.service.js';
import { EventDeliveryRepository } from '../event-delivery.repository.js';
import { EventsService, REDELIVER_PER_CALL } from '../events.service.js';
import { type EndpointRow, FIRST_ENDPOINT_ID, typeMatches } from './endpoint.js';
import type { CreateEndpointDto, EndpointDto, EndpointHealthDto, UpdateEndpointDto } from './endpoint.dto.js';
import { compileEndpointFilter } from './endpoint-filter.js';
import { EndpointDeliveriesRepository, type EndpointDeliveryState, type HealthFigures } from './endpoint-deliveries.repository.js';
import { EndpointDeliveryService } from './endpoint-delivery.service.js';
import { EndpointSecrets } from './endpoint-secrets.js';
import { EndpointsRepository } from './endpoints.repository.js';

const DEFAULT_OVERLAP_SECONDS = 86_400;
const DEFAULT_MAX_IN_FLIGHT = 4;

const STATES_OF: Record<'failed' | 'missed' | 'any', readonly EndpointDeliveryState[]> = {
  failed: ['failed'],
  missed: ['missed'],
  any: ['failed', 'missed', 'delivered'],
};

/**
 * A tenant's event endpoints (API.md section 13, docs/endpoints.md): its eventsTargetUrl listed first under the nil
 * UUID, and the endpoints it added, with their secrets, choices of events, filters, limits and health.
 */
@Injectable()
export class EndpointsService {
  private readonly targets: TargetPolicy;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: EndpointsRepository,
    private readonly deliveries: EndpointDeliveriesRepository,
    private readonly targetDeliveries: EventDeliveryRepository,
    private readonly delivery: EndpointDeliveryService,
    private readonly secrets: EndpointSecrets,
    private readonly tenants: TenantsService,
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {
    this.targets = targetPolicy(config.production, config.security.eventsTargetAllowPrivate);
    tenants.endpointsOf = (m, tenantId) => repo.countOfTenantIn(m, tenantId);
  }

  async create(tenantId: string, dto: CreateEndpointDto): Promise<EndpointDto & { secret: string }> {
    await this.tenants.get(tenantId);
    this.checkUrl(dto.url);
    this.checkFilter(dto.filter);
    const id = randomUUID();
    const { secret, sealed } = await this.secrets.fresh(tenantId, id);
    const inserted = await this.repo.insertBounded(
      {
        id,
        tenantId,
        url: dto.url,
        description: dto.description ?? null,
        eventTypes: dto.eventTypes ?? null,
        filter: dto.filter ?? null,
        rateLimitPerSecond: dto.rateLimitPerSecond ?? null,
        maxInFlight: dto.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
        disabled: dto.disabled ?? false,
        secretEnc: sealed,
      },
      this.config.endpoints.perTenant,
    );
    if (!inserted)
      throw new AppError(
        'endpoint_limit',
        `The tenant has ${this.config.endpoints.perTenant} event endpoints (ENDPOINTS_PER_TENANT, eventsTargetUrl included): delete one first.`,
      );
    const ep = await this.repo.find(tenantId, id);
    if (!ep) throw endpointNotFound();
    return { ...(await this.view(ep)), secret };
  }

  async list(tenantId: string): Promise<EndpointDto[]> {
    const tenant = await this.tenants.get(tenantId);
    const added = await this.repo.listOfTenant(tenantId);
    const views = await Promise.all(added.map((e) => this.view(e)));
    return tenant.eventsTargetUrl ? [await this.firstView(tenant), ...views] : views;
  }

  async get(tenantId: string, id: string): Promise<EndpointDto> {
    const tenant = await this.tenants.get(tenantId);
    if (id === FIRST_ENDPOINT_ID) return this.firstView(this.requireFirst(tenant));
    return this.view(await this.require(tenantId, id));
  }

  async update(tenantId: string, id: string, dto: UpdateEndpointDto): Promise<EndpointDto> {
    const tenant = await this.tenants.get(tenantId);
    if (id === FIRST_ENDPOINT_ID) return this.updateFirst(this.requireFirst(tenant), dto);
    await this.require(tenantId, id);
    if (dto.url !== undefined) this.checkUrl(dto.url);
    if (dto.filter !== undefined) this.checkFilter(dto.filter);
    const { disabled, ...fields } = dto;
    let ep = await this.repo.update(tenantId, id, fields);
    if (disabled !== undefined) ep = await this.repo.setDisabled(tenantId, id, disabled);
    if (!ep) throw endpointNotFound();
    if (disabled === false) this.delivery.kickClaim();
    return this.view(ep);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    const tenant = await this.tenants.get(tenantId);
    if (id === FIRST_ENDPOINT_ID) {
      this.requireFirst(tenant);
      await this.tenants.update(tenantId, { eventsTargetUrl: null });
      return;
    }
    if (!(await this.repo.delete(tenantId, id))) throw endpointNotFound();
  }

  /** A new secret, shown once; the old one keeps signing for `overlapSeconds` (default a day). */
  async rotateSecret(tenantId: string, id: string, overlapSeconds = DEFAULT_OVERLAP_SECONDS): Promise<string> {
    const tenant = await this.tenants.get(tenantId);
    if (id === FIRST_ENDPOINT_ID) {
      this.requireFirst(tenant);
      throw new AppError(
        'conflict',
        "The first endpoint is the tenant's eventsTargetUrl: its secret is the events secret, rotated by the operator (POST /v1/tenants/{tenantId}/events-secret).",
      );
    }
    const ep = await this.require(tenantId, id);
    const { secret, sealed } = await this.secrets.fresh(tenantId, id);
    const overlap = overlapSeconds > 0;
    const prev = overlap ? await this.secrets.sealAsPrevious(ep) : null;
    const until = overlap ? new Date(this.clock.now().getTime() + overlapSeconds * 1000) : null;
    if (!(await this.repo.replaceSecret(tenantId, id, sealed, prev, until))) throw endpointNotFound();
    return secret;
  }

  /** Queues again the endpoint's deliveries of events received since `since` in `state`; answers how many. */
  async redeliver(tenantId: string, id: string, since: Date, state: 'failed' | 'missed' | 'any'): Promise<number> {
    const tenant = await this.tenants.get(tenantId);
    if (id === FIRST_ENDPOINT_ID) {
      this.requireFirst(tenant);
      const mapped = state === 'failed' ? 'dead' : state;
      return (await this.events.redeliverSince(tenantId, since, mapped)).queued;
    }
    const ep = await this.require(tenantId, id);
    if (ep.disabled) throw new AppError('conflict', 'The endpoint is disabled: enable it first (PATCH {"disabled": false}).');
    const kept = this.tenants.keptSince(tenant);
    const queued = await this.deliveries.redeliverSince(id, since < kept ? kept : since, STATES_OF[state], REDELIVER_PER_CALL);
    if (queued > 0) this.delivery.kickClaim();
    return queued;
  }

  /** Whether the endpoint's types and filter take this event (as delivered: `{type, timestamp, data}`). */
  async testFilter(tenantId: string, id: string, event: Record<string, unknown>): Promise<boolean> {
    const tenant = await this.tenants.get(tenantId);
    const type = typeof event.type === 'string' ? event.type : '';
    if (id === FIRST_ENDPOINT_ID) {
      this.requireFirst(tenant);
      return tenant.eventTypes === null || tenant.eventTypes.includes(type);
    }
    const ep = await this.require(tenantId, id);
    if (!typeMatches(ep.eventTypes, type)) return false;
    if (ep.filter === null) return true;
    const compiled = compileEndpointFilter(ep.filter);
    return compiled.ok && compiled.filter.matches(event);
  }

  private async updateFirst(tenant: TenantEntity, dto: UpdateEndpointDto): Promise<EndpointDto> {
    const refused = (['description', 'filter', 'rateLimitPerSecond', 'maxInFlight'] as const).filter((k) => dto[k] !== undefined);
    if (refused.length > 0)
      throw new AppError(
        'validation_failed',
        `The first endpoint is the tenant's eventsTargetUrl: it takes url, eventTypes and disabled only (not ${refused.join(', ')}).`,
      );
    if (dto.eventTypes?.some((t) => t.endsWith('*')))
      throw new AppError('validation_failed', "The first endpoint's eventTypes are exact names (the tenant's eventTypes).");
    if (dto.url !== undefined) this.checkUrl(dto.url);
    let updated = tenant;
    // Setting eventsTargetUrl again (even to the same URL) is how a tenant enables it after a 410 Gone.
    const url = dto.url ?? (dto.disabled === false ? (tenant.eventsTargetUrl ?? undefined) : undefined);
    if (url !== undefined || dto.eventTypes !== undefined)
      updated = await this.tenants.update(tenant.id, {
        ...(url !== undefined ? { eventsTargetUrl: url } : {}),
        ...(dto.eventTypes !== undefined ? { eventTypes: dto.eventTypes } : {}),
      });
    if (dto.disabled === true && updated.eventsTargetUrl) {
      await this.tenants.disableEventsTarget(tenant.id, updated.eventsTargetUrl, null);
      updated = await this.tenants.get(tenant.id);
    }
    return this.firstView(updated);
  }

  private async view(ep: EndpointRow): Promise<EndpointDto> {
    return {
      id: ep.id,
      url: ep.url,
      description: ep.description,
      eventTypes: ep.eventTypes,
      filter: (ep.filter as Record<string, unknown> | null) ?? null,
      rateLimitPerSecond: ep.rateLimitPerSecond,
      maxInFlight: ep.maxInFlight,
      disabled: ep.disabled,
      createdAt: ep.createdAt.toISOString(),
      health: healthOf(
        ep.disabled ? 'disabled' : ep.failingSince ? 'failing' : 'healthy',
        ep.failingSince,
        ep.disabled ? (ep.disabledReason ?? 'request') : null,
        await this.deliveries.health(ep.id),
      ),
    };
  }

  private async firstView(tenant: TenantEntity): Promise<EndpointDto> {
    const figures = await this.targetDeliveries.targetHealth(tenant.id, this.config.events.retrySpanMs);
    return {
      id: FIRST_ENDPOINT_ID,
      url: tenant.eventsTargetUrl ?? '',
      description: 'eventsTargetUrl',
      eventTypes: tenant.eventTypes,
      filter: null,
      rateLimitPerSecond: null,
      maxInFlight: null,
      disabled: tenant.eventsTargetDisabled,
      createdAt: tenant.createdAt.toISOString(),
      health: healthOf(tenant.eventsTargetDisabled ? 'disabled' : 'healthy', null, tenant.eventsTargetDisabled ? 'gone' : null, figures),
    };
  }

  private requireFirst(tenant: TenantEntity): TenantEntity {
    if (!tenant.eventsTargetUrl) throw endpointNotFound();
    return tenant;
  }

  private async require(tenantId: string, id: string): Promise<EndpointRow> {
    const ep = await this.repo.find(tenantId, id);
    if (!ep) throw endpointNotFound();
    return ep;
  }

  /** eventsTargetUrl's rules (target-policy.ts): https; plain http only to localhost/127.0.0.1 outside production. */
  private checkUrl(url: string): void {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new AppError('validation_failed', 'url is not a URL.');
    }
    const local = ['localhost', '127.0.0.1', '[::1]'].includes(parsed.hostname);
    if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && local && !this.config.production))
      throw new AppError('validation_failed', 'url must be https (plain http only to localhost or 127.0.0.1, outside production).');
    const problem = targetProblem(this.targets, url);
    if (problem) throw new AppError('target_not_allowed', problem.replace('eventsTargetUrl', 'An endpoint url'));
  }

  private checkFilter(filter: unknown): void {
    if (filter === undefined || filter === null) return;
    const compiled = compileEndpointFilter(filter);
    if (!compiled.ok) throw new AppError('validation_failed', `${compiled.path}: ${compiled.message}`, { path: compiled.path });
  }
}

function healthOf(
  state: EndpointHealthDto['state'],
  failingSince: Date | null,
  disabledReason: EndpointHealthDto['disabledReason'] | null,
  f: HealthFigures,
): EndpointHealthDto {
  return {
    state,
    ...(failingSince ? { failingSince: failingSince.toISOString() } : {}),
    ...(disabledReason ? { disabledReason } : {}),
    successRate24h: f.attempts24h === 0 ? null : Math.round((f.succeeded24h / f.attempts24h) * 1000) / 1000,
    p99Ms24h: f.p99Ms24h,
    pending: f.pending,
    oldestPendingSeconds: f.oldestPendingSeconds,
  };
}

function endpointNotFound(): AppError {
  return new AppError('endpoint_not_found', 'No such event endpoint.');
}
