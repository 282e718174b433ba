import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import type { ChangeFeed } from '../changes/change-feed.service.js';
import { AppError } from '../common/app-error.js';
import type { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import type { ConnectionEntity } from '../connections/store/connection.entity.js';
import type { ConnectionsRepository } from '../connections/store/connections.repository.js';
import type { QuotaService } from '../quota/quota.service.js';
import type { RenewalService } from '../refresh/renewal.service.js';
import type { Design } from '../tenants/tenant.entity.js';
import type { TenantsService } from '../tenants/tenants.service.js';
import type { UpstreamClient } from '../upstream/upstream-client.service.js';
import type { Outcome } from '../upstream/streamed-request.js';
import type { ResourceRequest, ResourceResponse } from '../upstream/upstream.types.js';
import { RouteCache } from './route-cache.js';
import { Environments } from '../config/environments.js';
import { RoutingService } from './routing.service.js';

const env = {
  name: 'sandbox',
  apiUrl: 'http://up',
  authUrl: 'http://up',
  clientId: 'c',
  clientSecret: 's',
  scopes: [],
  tokenAuth: 'body',
  userinfoMethod: 'GET',
} as const;
const config = { environments: { sandbox: env }, refresh: { onDemandMarginMs: 60_000 } } as unknown as AppConfig;

function connection(
  id: string,
  kind: 'admin' | 'user',
  userId: string | null,
  status: 'active' | 'reauth_required' = 'active',
  isAdmin = kind === 'admin',
): ConnectionEntity {
  return { id, tenantId: 't', kind, userId, status, isAdmin, accessTokenEnc: 'sealed', version: 1 } as ConnectionEntity;
}

function setup(design: Design, rows: ConnectionEntity[], upstreamStatuses: number[] = [200]) {
  const sent: Array<{ token: string; path: string }> = [];
  const quota: string[] = [];
  const renewals: Array<{ id: string; version: number }> = [];
  const feed = { live: true, subscribe: () => undefined, onReset: () => undefined } as unknown as ChangeFeed;
  const service = new RoutingService(
    config,
    { now: () => new Date() } as Clock,
    { get: async () => ({ environment: 'sandbox', design, quotas: { read: '5/60s' } }) } as unknown as TenantsService,
    {
      findAdmin: async () => rows.find((r) => r.kind === 'admin') ?? null,
      findUser: async (_t: string, userId: string) => rows.find((r) => r.kind === 'user' && r.userId === userId) ?? null,
    } as unknown as ConnectionsRepository,
    {
      accessTokenFor: async (c: ConnectionEntity) => ({
        accessToken: `token-of-${c.id}`,
        version: 1,
        expiresAt: new Date(Date.now() + 3_600_000),
      }),
      renewAfterRejection: async (c: ConnectionEntity, version: number) => {
        renewals.push({ id: c.id, version });
        return { accessToken: `renewed-${c.id}`, version: 2, expiresAt: new Date(Date.now() + 3_600_000) };
      },
    } as unknown as RenewalService,
    {
      resourceTo: (_e: unknown, req: ResourceRequest, outcome: Outcome<ResourceResponse>) => {
        sent.push({ token: req.accessToken, path: req.path });
        outcome.answer({
          status: upstreamStatuses.shift() ?? 200,
          headers: {},
          body: Object.assign(Readable.from([]), { dump: async () => undefined }) as unknown as ResourceResponse['body'],
        });
      },
    } as unknown as UpstreamClient,
    new RouteCache(feed),
    new Environments(config.environments),
    {
      take: (_t: string, cls: string, budget: { text: string } | undefined, lane: string) => {
        quota.push(`take ${cls} ${budget?.text ?? 'none'} ${lane}`);
        return null;
      },
      upstreamRefused: (_t: string, cls: string, lane: string, seconds: number | null) => quota.push(`429 ${cls} ${lane} ${seconds}`),
    } as unknown as QuotaService,
  );
  return { service, sent, renewals, quota };
}

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e: unknown) => (e instanceof AppError ? e.code : String(e)),
  );

describe('RoutingService: which token serves a call (API.md 7, invariant 6)', () => {
  const rows = [
    connection('adm', 'admin', null),
    connection('ali', 'user', 'u-alice'),
    connection('car', 'user', 'u-carol', 'reauth_required'),
  ];

  it('user routes: the named user, never the admin silently', async () => {
    const { service, sent } = setup('admin+users', rows);
    await service.call('t', 'user', 'u-alice', { method: 'GET', path: '/workflows', headers: {} });
    expect(sent.map((s) => s.token)).toEqual(['token-of-ali']);
    expect(await codeOf(service.call('t', 'user', undefined, { method: 'GET', path: '/workflows', headers: {} }))).toBe('user_id_required');
    expect(await codeOf(service.call('t', 'user', 'u-nobody', { method: 'GET', path: '/workflows', headers: {} }))).toBe(
      'user_not_connected',
    );
    expect(await codeOf(service.call('t', 'user', 'u-carol', { method: 'GET', path: '/workflows', headers: {} }))).toBe('reauth_required');
    expect(sent).toHaveLength(1);
  });

  it('admin routes: the admin connection only, X-User-Id ignored; none, or design users, is admin_not_connected', async () => {
    const { service, sent } = setup('admin+users', rows);
    await service.call('t', 'admin', 'u-alice', { method: 'GET', path: '/webhooks', headers: {} });
    expect(sent.map((s) => s.token)).toEqual(['token-of-adm']);
    expect(await codeOf(setup('admin+users', rows.slice(1)).service.resolve('t', 'admin', 'u-alice'))).toBe('admin_not_connected');
    expect(await codeOf(setup('users', rows).service.resolve('t', 'admin', undefined))).toBe('admin_not_connected');
  });

  it('an admin connection whose admin check failed never serves an admin route, but still serves design admin user routes', async () => {
    const notAdmin = [connection('adm', 'admin', null, 'active', false), ...rows.slice(1)];
    const { service, sent } = setup('admin', notAdmin);
    expect(await codeOf(service.call('t', 'admin', undefined, { method: 'GET', path: '/webhooks', headers: {} }))).toBe(
      'admin_not_connected',
    );
    expect(sent).toHaveLength(0);
    expect((await service.resolve('t', 'user', undefined)).connection.id).toBe('adm');
  });

  it('design admin: a user route without X-User-Id uses the admin connection', async () => {
    const { service } = setup('admin', rows);
    expect((await service.resolve('t', 'user', undefined)).connection.id).toBe('adm');
    expect(await codeOf(setup('admin', rows.slice(1)).service.resolve('t', 'user', undefined))).toBe('admin_not_connected');
  });

  it('an upstream 401 renews once and retries once, only when the body can be sent again', async () => {
    const replay = setup('admin+users', rows, [401, 200]);
    const res = await replay.service.call('t', 'user', 'u-alice', {
      method: 'POST',
      path: '/workflows',
      headers: {},
      body: '{"name":"x"}',
    });
    expect(res.status).toBe(200);
    expect(replay.renewals).toEqual([{ id: 'ali', version: 1 }]);
    expect(replay.sent.map((s) => s.token)).toEqual(['token-of-ali', 'renewed-ali']);

    const twice = setup('admin+users', rows, [401, 401]);
    expect((await twice.service.call('t', 'user', 'u-alice', { method: 'GET', path: '/workflows', headers: {} })).status).toBe(401);
    expect(twice.sent).toHaveLength(2);

    const streamed = setup('admin+users', rows, [401]);
    const body = Readable.from([Buffer.from('x')]);
    body.read();
    expect((await streamed.service.call('t', 'user', 'u-alice', { method: 'POST', path: '/workflows', headers: {}, body })).status).toBe(
      401,
    );
    expect(streamed.renewals).toHaveLength(0);
  });

  it('every call sent upstream is checked against its class and lane first; an upstream 429 is answered as it came, not retried', async () => {
    const { service, sent, quota } = setup('admin+users', rows, [401, 200, 429]);
    await service.call('t', 'user', 'u-alice', { method: 'GET', path: '/workflows', headers: {}, lane: 'agent' });
    const refused = await service.call('t', 'user', 'u-alice', { method: 'POST', path: '/workflows', headers: {}, body: '{}' });
    expect(refused.status).toBe(429);
    expect(sent).toHaveLength(3);
    // The tenant's own read budget, none for writes; the renewed retry after a 401 is a call of its own.
    expect(quota).toEqual(['take read 5/60s agent', 'take read 5/60s agent', 'take write none interactive', '429 write interactive null']);
  });
});
