import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { AuditContext } from '../audit/audit-context.js';
import { AuditService } from '../audit/audit.service.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { targetPolicy, targetProblem, type TargetPolicy } from '../common/target-policy.js';
import { TenantKeys } from '../vault/tenant-keys.service.js';
import { TokenVault, VaultError, type SealedRef } from '../vault/token-vault.service.js';
import { budgetsInForce, parseBudget, QUOTA_CLASSES } from '../config/quota-budgets.js';
import { QuotaService } from '../quota/quota.service.js';
import type { QuotaClassUsage } from '../quota/quota-usage.js';
import type { CreateTenantDto, UpdateTenantDto } from './dto/tenant.dto.js';
import { TENANT_ID } from '../common/params.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsRepository } from './tenants.repository.js';
import type { EntityManager } from 'typeorm';

@Injectable()
export class TenantsService {
  private readonly targets: TargetPolicy;
  /**
   * The tenant's added event endpoints, read in the given transaction. Set by the event endpoints (a module above this
   * one: EndpointsService), so that a first eventsTargetUrl counts toward ENDPOINTS_PER_TENANT.
   */
  endpointsOf: (m: EntityManager, tenantId: string) => Promise<number> = () => Promise.resolve(0);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: TenantsRepository,
    private readonly vault: TokenVault,
    private readonly clock: Clock,
    private readonly environments: Environments,
    private readonly keys: ApiKeysService,
    private readonly quota: QuotaService,
    private readonly tenantKeys: TenantKeys,
    private readonly audit: AuditService,
  ) {
    this.targets = targetPolicy(config.production, config.security.eventsTargetAllowPrivate);
  }

  async create(dto: CreateTenantDto): Promise<{ tenant: TenantEntity; eventsSecret: string }> {
    this.environments.get(dto.environment);
    this.checkTargetUrl(dto.eventsTargetUrl);
    const now = this.clock.now();
    for (let attempt = 0; attempt < 5; attempt++) {
      const id = dto.id ?? (attempt === 0 ? slugOf(dto.name) : `${slugOf(dto.name).slice(0, 56)}-${randomBytes(3).toString('hex')}`);
      const eventsSecret = newEventsSecret();
      const tenant = Object.assign(new TenantEntity(), {
        id,
        name: dto.name,
        environment: dto.environment,
        design: dto.design ?? 'admin+users',
        allowedReturnUrls: dto.allowedReturnUrls,
        eventsTargetUrl: dto.eventsTargetUrl ?? null,
        eventsSecretEnc: await this.vault.seal(eventsSecret, secretRef(id)),
        eventsSecretPrevEnc: null,
        eventsSecretPrevUntil: null,
        eventTypes: dto.eventTypes ?? null,
        eventsTargetDisabled: false,
        eventRetentionDays: dto.eventRetentionDays ?? null,
        quotas: null,
        syncWorkflows: null,
        deletedAt: null,
        createdAt: now,
        updatedAt: now,
      });
      if (await this.repo.insert(tenant)) return { tenant, eventsSecret };
      if (dto.id) throw new AppError('tenant_exists', `A tenant with id "${dto.id}" already exists.`);
    }
    throw new AppError('tenant_exists', 'Could not find a free id for this name; pass an explicit id.');
  }

  /** Every tenant, or (with `limit`) one page of them after the tenant `after`. */
  list(limit?: number, after?: string): Promise<TenantEntity[]> {
    return limit === undefined ? this.repo.list() : this.repo.listPage(limit, after ?? null);
  }

  /** Whether a tenant with this id exists (and is not deleted); an id that cannot be one is answered without a query. */
  async exists(id: string): Promise<boolean> {
    return TENANT_ID.test(id) && (await this.repo.exists(id));
  }

  async get(id: string): Promise<TenantEntity> {
    const tenant = await this.repo.findById(id);
    if (!tenant) throw new AppError('tenant_not_found', 'No such tenant.');
    return tenant;
  }

  async update(id: string, dto: UpdateTenantDto): Promise<TenantEntity> {
    await this.get(id);
    this.checkTargetUrl(dto.eventsTargetUrl ?? undefined);
    const changes: Parameters<TenantsRepository['update']>[1] = {};
    if (dto.name !== undefined) changes.name = dto.name;
    if (dto.design !== undefined) changes.design = dto.design;
    if (dto.allowedReturnUrls !== undefined) changes.allowedReturnUrls = dto.allowedReturnUrls;
    if (dto.eventsTargetUrl !== undefined) {
      changes.eventsTargetUrl = dto.eventsTargetUrl;
      // Setting the target again (even to the same URL) is how a tenant says it is back after a 410 Gone.
      changes.eventsTargetDisabled = false;
    }
    if (dto.eventTypes !== undefined) changes.eventTypes = dto.eventTypes;
    if (dto.eventRetentionDays !== undefined) changes.eventRetentionDays = dto.eventRetentionDays;
    if (dto.quotas !== undefined) changes.quotas = ownQuotas(dto.quotas);
    if (dto.sync?.workflows !== undefined) changes.syncWorkflows = dto.sync.workflows;
    const updated = !Object.keys(changes).length
      ? await this.repo.findById(id)
      : changes.eventsTargetUrl
        ? await this.repo.updateWithinEndpoints(id, changes, async (m) => (await this.endpointsOf(m, id)) < this.config.endpoints.perTenant)
        : await this.repo.update(id, changes);
    if (updated === 'full')
      throw new AppError(
        'endpoint_limit',
        `The tenant has ${this.config.endpoints.perTenant} event endpoints (ENDPOINTS_PER_TENANT), and eventsTargetUrl would be one more: delete one first.`,
      );
    if (!updated) throw new AppError('tenant_not_found', 'No such tenant.');
    return updated;
  }

  /**
   * Deletes a tenant: from this moment it answers 404 and its keys are revoked; its rows (connections and their
   * tokens, sessions, receivers, events, attempts) are removed in the background in small batches
   * (retention/tenant-purge.ts), so no transaction holds locks other tenants need. Its data keys are destroyed at
   * once: whatever of its rows survives anywhere (a backup taken from now on, a row not purged yet) no longer opens
   * (its own audit row, `tenant_key.destroyed`, says how many versions).
   */
  async delete(id: string, by: AuditContext): Promise<void> {
    const now = this.clock.now();
    if (!(await this.repo.markDeleted(id, now))) throw new AppError('tenant_not_found', 'No such tenant.');
    await this.keys.revokeAllOf(id, now);
    const versions = await this.tenantKeys.destroy(id);
    await this.audit.recordAfter({
      action: 'tenant_key.destroyed',
      ...by,
      tenantId: id,
      target: null,
      outcome: 'success',
      details: { versions },
    });
  }

  /** Its budgets in force per class, with the figures every instance saved (docs/quotas.md). */
  quotaUsageOf(tenant: TenantEntity): Promise<Record<'read' | 'write', QuotaClassUsage>> {
    const environment = this.environments.find(tenant.environment)?.quotas ?? {};
    return this.quota.usage(tenant.id, budgetsInForce(environment, tenant.quotas), tenant.quotas);
  }

  /** How many days the tenant's events are kept: its own window, else EVENT_RETENTION_DAYS. */
  retentionDaysOf(tenant: Pick<TenantEntity, 'eventRetentionDays'>): number {
    return tenant.eventRetentionDays ?? this.config.events.retentionDays;
  }

  /** The longest window any tenant keeps its events, in days (EVENT_RETENTION_DAYS at least). */
  async longestRetentionDays(): Promise<number> {
    return Math.max(this.config.events.retentionDays, (await this.repo.longestRetention()) ?? 0);
  }

  /** The oldest receipt time of the tenant's events that are still kept (older ones are expired, even before removal). */
  keptSince(tenant: Pick<TenantEntity, 'eventRetentionDays'>): Date {
    return new Date(this.clock.now().getTime() - this.retentionDaysOf(tenant) * 86_400_000);
  }

  /**
   * A new events secret. Without an overlap the old one stops signing at once; with one, every delivery is
   * signed with both until the overlap ends, so the partner can switch its verifier in its own time. A second
   * rotation during an overlap ends that overlap: only the secret being replaced keeps signing.
   */
  async rotateEventsSecret(id: string, overlapSeconds = 0): Promise<string> {
    const tenant = await this.get(id);
    const eventsSecret = newEventsSecret();
    const overlap = overlapSeconds > 0;
    await this.repo.update(id, {
      eventsSecretEnc: await this.vault.seal(eventsSecret, secretRef(id)),
      eventsSecretPrevEnc: overlap
        ? await this.vault.seal(await this.openSecret(tenant.eventsSecretEnc, secretRef(id)), prevSecretRef(id))
        : null,
      eventsSecretPrevUntil: overlap ? new Date(this.clock.now().getTime() + overlapSeconds * 1000) : null,
    });
    return eventsSecret;
  }

  /**
   * The plaintext secrets that sign this tenant's events now, the current one first; for the outbound delivery
   * only. Throws AppError('secret_unreadable') when one does not open: a rotation without overlap replaces it.
   */
  async signingSecretsOf(tenant: TenantEntity): Promise<string[]> {
    const secrets = [await this.openSecret(tenant.eventsSecretEnc, secretRef(tenant.id))];
    if (tenant.eventsSecretPrevEnc && tenant.eventsSecretPrevUntil && tenant.eventsSecretPrevUntil > this.clock.now()) {
      secrets.push(await this.openSecret(tenant.eventsSecretPrevEnc, prevSecretRef(tenant.id)));
    }
    return secrets;
  }

  /** The vault counted and logged a secret that does not open; the tenant's caller gets a code it can act on. */
  private async openSecret(sealed: string, ref: SealedRef): Promise<string> {
    try {
      return await this.vault.open(sealed, ref);
    } catch (e) {
      if (!(e instanceof VaultError)) throw e;
      if (e.ringBehind) throw new AppError('service_unavailable', 'This instance does not hold the key of the events secret yet; retry.');
      throw new AppError(
        'secret_unreadable',
        "The tenant's stored events secret cannot be read: rotate it without overlapSeconds to replace it.",
      );
    }
  }

  /** The target answered 410 Gone. False when the tenant has another target by now (or it was disabled already). */
  disableEventsTarget(id: string, url: string, within: ((m: EntityManager) => Promise<void>) | null): Promise<boolean> {
    return this.repo.disableEventsTarget(id, url, within);
  }

  private checkTargetUrl(url: string | undefined): void {
    if (url && this.config.production && !url.startsWith('https://')) {
      throw new AppError('validation_failed', 'eventsTargetUrl must be an https URL in production.');
    }
    const problem = url ? targetProblem(this.targets, url) : null;
    if (problem) throw new AppError('target_not_allowed', problem);
  }
}

function secretRef(id: string): SealedRef {
  return { table: 'tenants', id, column: 'events_secret_enc', tenantId: id };
}

function prevSecretRef(id: string): SealedRef {
  return { table: 'tenants', id, column: 'events_secret_prev_enc', tenantId: id };
}

/** Standard Webhooks secrets: "whsec_" and the base64 of the key bytes. */
function newEventsSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function slugOf(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/g, '');
  return slug || `tenant-${randomBytes(3).toString('hex')}`;
}

/** A tenant's own budgets as stored: each as parsed (`400/60s`), classes left out or null dropped; none: null. */
function ownQuotas(quotas: Partial<Record<'read' | 'write', string | null>> | null): Record<string, string> | null {
  const own: Record<string, string> = {};
  for (const cls of QUOTA_CLASSES) {
    const text = quotas?.[cls];
    const budget = typeof text === 'string' ? parseBudget(text) : null;
    if (budget !== null && typeof budget !== 'string') own[cls] = budget.text;
  }
  return Object.keys(own).length > 0 ? own : null;
}
