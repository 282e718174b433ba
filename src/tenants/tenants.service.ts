import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { TokenVault, type SealedRef } from '../vault/token-vault.service.js';
import type { CreateTenantDto, UpdateTenantDto } from './dto/tenant.dto.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsRepository } from './tenants.repository.js';

@Injectable()
export class TenantsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: TenantsRepository,
    private readonly vault: TokenVault,
    private readonly clock: Clock,
  ) {}

  async create(dto: CreateTenantDto): Promise<{ tenant: TenantEntity; eventsSecret: string }> {
    if (!this.config.environments[dto.environment]) {
      throw new AppError('environment_not_configured', `The environment "${dto.environment}" is not configured on this service (CWS_${dto.environment.toUpperCase()}_AUTH_URL).`);
    }
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
        eventsSecretEnc: this.vault.seal(eventsSecret, secretRef(id)),
        createdAt: now,
        updatedAt: now,
      });
      if (await this.repo.insert(tenant)) return { tenant, eventsSecret };
      if (dto.id) throw new AppError('tenant_exists', `A tenant with id "${dto.id}" already exists.`);
    }
    throw new AppError('tenant_exists', 'Could not find a free id for this name; pass an explicit id.');
  }

  list(): Promise<TenantEntity[]> {
    return this.repo.list();
  }

  async get(id: string): Promise<TenantEntity> {
    const tenant = await this.repo.getById(id);
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
    if (dto.eventsTargetUrl !== undefined) changes.eventsTargetUrl = dto.eventsTargetUrl;
    const updated = Object.keys(changes).length ? await this.repo.update(id, changes) : await this.repo.getById(id);
    if (!updated) throw new AppError('tenant_not_found', 'No such tenant.');
    return updated;
  }

  async delete(id: string): Promise<void> {
    if (!(await this.repo.delete(id))) throw new AppError('tenant_not_found', 'No such tenant.');
  }

  async rotateEventsSecret(id: string): Promise<string> {
    await this.get(id);
    const eventsSecret = newEventsSecret();
    await this.repo.update(id, { eventsSecretEnc: this.vault.seal(eventsSecret, secretRef(id)) });
    return eventsSecret;
  }

  /** The plaintext secret that signs this tenant's events; for the outbound delivery only. */
  async eventsSecretOf(id: string): Promise<string> {
    const tenant = await this.get(id);
    return this.vault.open(tenant.eventsSecretEnc, secretRef(id));
  }

  private checkTargetUrl(url: string | undefined): void {
    if (url && this.config.production && !url.startsWith('https://')) {
      throw new AppError('validation_failed', 'eventsTargetUrl must be an https URL in production.');
    }
  }
}

function secretRef(id: string): SealedRef {
  return { table: 'tenants', id, column: 'events_secret_enc' };
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
