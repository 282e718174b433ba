import { Readable } from 'node:stream';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { budgetsInForce, quotaClassOf } from '../config/quota-budgets.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import { ConnectionsRepository } from '../connections/store/connections.repository.js';
import { RenewalService } from '../refresh/renewal.service.js';
import { connectionAttributes } from '../telemetry/client-spans.js';
import { annotate } from '../telemetry/operation-spans.js';
import { QuotaService } from '../quota/quota.service.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { retryAfterOf } from '../upstream/upstream-answers.js';
import { UpstreamClient } from '../upstream/upstream-client.service.js';
import { upstreamFailure } from '../upstream/upstream.errors.js';
import type { Outcome } from '../upstream/streamed-request.js';
import type { ResourceRequest, ResourceResponse } from '../upstream/upstream.types.js';
import { ownerKey, RouteCache, type CachedTenant, type CachedToken } from './route-cache.js';

/** Whose token a facade route needs (API.md section 7). */
export type RouteKind = 'user' | 'admin';

/** Who a call is for, in the order served when a company's upstream budget is short (docs/quotas.md). */
export type Lane = 'interactive' | 'agent' | 'background';

export type RoutedRequest = Omit<ResourceRequest, 'accessToken' | 'trace'> & { lane?: Lane };
export type RoutedResponse = ResourceResponse & { connectionId: string };

interface Picked {
  connection: ConnectionEntity;
  env: CwsEnvironment;
  tenant: CachedTenant;
}

/**
 * Which connection serves an upstream call, and the call itself with that connection's token.
 *
 * Invariant 6 lives here: an admin route is served by the admin connection only; a user route by the
 * named user's connection, or by the admin connection only in design `admin` when no user is named.
 */
@Injectable()
export class RoutingService {
  private readonly marginMs: number;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly clock: Clock,
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsRepository,
    private readonly renewal: RenewalService,
    private readonly upstream: UpstreamClient,
    private readonly cache: RouteCache,
    private readonly environments: Environments,
    private readonly quota: QuotaService,
  ) {
    this.marginMs = config.refresh.onDemandMarginMs;
  }

  /** Picks the connection for a call (API.md 7 rules); throws the contract's routing errors. */
  async resolve(
    tenantId: string,
    route: RouteKind,
    userId: string | undefined,
  ): Promise<{ connection: ConnectionEntity; env: CwsEnvironment }> {
    const { connection, env } = await this.pick(tenantId, route, userId);
    return { connection, env };
  }

  /**
   * One upstream call with the right token; the response is streamed (the caller consumes or dumps the
   * body). An upstream 401 causes one renewal and one retry, when the request body can be sent again. Each
   * call sent upstream is one of the company's budget (docs/quotas.md): `429 quota_exhausted` when its lane
   * (`req.lane`, interactive when absent) finds no room in time; an upstream 429 is answered as it came and never retried.
   */
  call(tenantId: string, route: RouteKind, userId: string | undefined, req: RoutedRequest): Promise<RoutedResponse> {
    return new Promise((resolve, reject) => this.callTo(tenantId, route, userId, req, { answer: resolve, fail: reject }));
  }

  /** `call`, its answer or failure handed to `outcome` (which must not throw): no promise on the way when all is cached. */
  callTo(tenantId: string, route: RouteKind, userId: string | undefined, req: RoutedRequest, outcome: Outcome<RoutedResponse>): void {
    let picked: Picked | null = null;
    let token: CachedToken | undefined;
    try {
      // Tenant, connection and a fresh token all cached (the common case): no promise before the upstream call.
      const tenant = this.cache.tenant(tenantId);
      if (tenant !== undefined) {
        const env = this.environments.get(tenant.environment);
        const kind = kindOf(tenant, route, userId);
        const found = this.cache.owner(tenantId, ownerKey(kind, kind === 'user' ? (userId as string) : null));
        if (found !== undefined) {
          const connection = usable(found, kind, route);
          token = this.cache.token(connection.id);
          if (token !== undefined && this.fresh(token)) picked = { connection, env, tenant };
        }
      }
    } catch (e) {
      outcome.fail(e);
      return;
    }
    if (picked !== null && token !== undefined) {
      this.callWith(picked, token, tenantId, req, outcome);
      return;
    }
    this.pick(tenantId, route, userId).then(
      (loaded) =>
        this.tokenFor(loaded.connection).then(
          (fresh) => this.callWith(loaded, fresh, tenantId, req, outcome),
          (e: unknown) => outcome.fail(e),
        ),
      (e: unknown) => outcome.fail(e),
    );
  }

  private callWith(picked: Picked, token: CachedToken, tenantId: string, req: RoutedRequest, outcome: Outcome<RoutedResponse>): void {
    const { connection, env, tenant } = picked;
    const trace = connectionAttributes(tenantId, connection.id, env.name, connection.kind === 'admin');
    if (trace !== null) annotate(trace);
    this.send(env, req, token.accessToken, trace, tenantId, tenant, {
      answer: (first) => {
        if (first.status !== 401 || !replayable(req.body)) outcome.answer(withConnection(first, connection.id));
        else
          this.renewAndSend(picked, token, tenantId, req, trace, first).then(
            (res) => outcome.answer(res),
            (e: unknown) => outcome.fail(e),
          );
      },
      fail: (e) => outcome.fail(e),
    });
  }

  /** After an upstream 401: one renewal of the connection's token, and the call once more with it. */
  private async renewAndSend(
    picked: Picked,
    token: CachedToken,
    tenantId: string,
    req: RoutedRequest,
    trace: ResourceRequest['trace'],
    first: ResourceResponse,
  ): Promise<RoutedResponse> {
    const { connection, env, tenant } = picked;
    await first.body.dump().catch(() => undefined);
    const renewed = await this.renewal.renewAfterRejection(connection, token.version);
    this.cache.renewedHere(connection.tenantId, connection.id, {
      accessToken: renewed.accessToken,
      version: renewed.version,
      expiresAt: renewed.expiresAt.getTime(),
    });
    const second = await new Promise<ResourceResponse>((resolve, reject) =>
      this.send(env, req, renewed.accessToken, trace, tenantId, tenant, { answer: resolve, fail: reject }),
    );
    return withConnection(second, connection.id);
  }

  private async pick(tenantId: string, route: RouteKind, userId: string | undefined): Promise<Picked> {
    const tenant = await this.tenantOf(tenantId);
    const env = this.environments.get(tenant.environment);
    const kind = kindOf(tenant, route, userId);
    const connection = usable(await this.connectionOf(tenantId, kind, kind === 'user' ? (userId as string) : null), kind, route);
    return { connection, env, tenant };
  }

  private async tenantOf(tenantId: string): Promise<CachedTenant> {
    const cached = this.cache.tenant(tenantId);
    if (cached) return cached;
    const epoch = this.cache.mark();
    const tenant = await this.tenants.get(tenantId);
    const quotas = budgetsInForce(this.environments.find(tenant.environment)?.quotas ?? {}, tenant.quotas);
    const value: CachedTenant = { environment: tenant.environment, design: tenant.design, quotas };
    this.cache.setTenant(tenantId, value, epoch);
    return value;
  }

  private async connectionOf(tenantId: string, kind: 'admin' | 'user', userId: string | null): Promise<ConnectionEntity | null> {
    const key = ownerKey(kind, userId);
    const cached = this.cache.owner(tenantId, key);
    if (cached !== undefined) return cached;
    const epoch = this.cache.mark();
    const found = kind === 'admin' ? await this.connections.findAdmin(tenantId) : await this.connections.findUser(tenantId, userId ?? '');
    this.cache.setOwner(tenantId, key, found, epoch);
    return found;
  }

  private fresh(token: CachedToken): boolean {
    return token.expiresAt - this.marginMs > this.clock.now().getTime();
  }

  private async tokenFor(connection: ConnectionEntity): Promise<CachedToken> {
    const cached = this.cache.token(connection.id);
    if (cached && this.fresh(cached)) return cached;
    const epoch = this.cache.mark();
    const fresh = await this.renewal.accessTokenFor(connection);
    const token: CachedToken = { accessToken: fresh.accessToken, version: fresh.version, expiresAt: fresh.expiresAt.getTime() };
    this.cache.setToken(connection.tenantId, connection.id, token, epoch);
    return token;
  }

  /** One call sent upstream, once the company's budget has room for it (the check is in memory; quota/). */
  private send(
    env: CwsEnvironment,
    req: RoutedRequest,
    accessToken: string,
    trace: ResourceRequest['trace'],
    tenantId: string,
    tenant: CachedTenant,
    outcome: Outcome<ResourceResponse>,
  ): void {
    const cls = quotaClassOf(req.method);
    const lane = req.lane ?? 'interactive';
    const upstream: Outcome<ResourceResponse> = {
      answer: (res) => {
        if (res.status === 429) this.quota.upstreamRefused(tenantId, cls, lane, retryAfterOf(res.headers['retry-after']));
        outcome.answer(res);
      },
      fail: (e) => outcome.fail(upstreamFailure(e) ?? e),
    };
    let wait: Promise<unknown> | null;
    try {
      wait = this.quota.take(tenantId, cls, tenant.quotas[cls], lane);
    } catch (e) {
      outcome.fail(e);
      return;
    }
    const request: ResourceRequest = { ...req, accessToken, trace };
    if (wait === null) this.upstream.resourceTo(env, request, upstream);
    else
      wait.then(
        () => this.upstream.resourceTo(env, request, upstream),
        (e: unknown) => outcome.fail(e),
      );
  }
}

/** The kind of connection a call needs (API.md 7 rules), or the contract's error. */
function kindOf(tenant: CachedTenant, route: RouteKind, userId: string | undefined): 'admin' | 'user' {
  if (route === 'admin') {
    // X-User-Id is ignored on admin routes: a user token never serves one.
    if (tenant.design === 'users')
      throw new AppError(
        'admin_not_connected',
        'This tenant uses per-user connections only (design "users"): admin-only endpoints are not available.',
      );
    return 'admin';
  }
  if (userId !== undefined) return 'user';
  if (tenant.design === 'admin') return 'admin';
  throw new AppError('user_id_required', 'This call acts for a user: name them in the X-User-Id header.');
}

/** The owner's connection, if it may serve the call; else the contract's error. */
function usable(connection: ConnectionEntity | null, kind: 'admin' | 'user', route: RouteKind): ConnectionEntity {
  if (!connection) {
    throw kind === 'admin'
      ? new AppError('admin_not_connected', 'No admin connection for this tenant: connect one with a connect session of kind "admin".')
      : new AppError('user_not_connected', 'This user has no connection: connect them with a connect session of kind "user".');
  }
  if (route === 'admin' && !connection.isAdmin) {
    // Admin-only endpoints (webhooks) are refused to non-admin tokens upstream (spec section 1, rule 5):
    // a connection whose admin check failed never carries its token there.
    throw new AppError(
      'admin_not_connected',
      'The admin connection belongs to a user without company administrator permission: connect an administrator (a connect session of kind "admin").',
    );
  }
  if (connection.status === 'reauth_required' || connection.accessTokenEnc === null) {
    throw new AppError('reauth_required', 'This connection needs the user to authorize again (a new connect session).', {
      connectionId: connection.id,
    });
  }
  return connection;
}

/** A body can be sent again when there is none, it is in memory, or it is a stream nobody has read from yet. */
function replayable(body: RoutedRequest['body']): boolean {
  if (body === undefined || body === null || typeof body === 'string' || Buffer.isBuffer(body)) return true;
  return body instanceof Readable && !body.readableDidRead && !body.destroyed;
}

function withConnection(res: ResourceResponse, connectionId: string): RoutedResponse {
  return { status: res.status, headers: res.headers, body: res.body, connectionId };
}
