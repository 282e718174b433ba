import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { parseVaultKeys } from '../../src/config/app-config.js';
import { SandboxServer } from 'cws-sandbox';
import { TokenVault } from '../../src/vault/token-vault.service.js';
import { receiverRef } from '../../src/webhooks/webhooks.service.js';
import { seedConnections } from '../support/seed-connections.js';
import { spawnApp, type SpawnedApp } from '../support/spawn-app.js';
import { sandboxEnv, testVaultKey } from '../support/test-app.js';
import { startOwnPostgres, type OwnPostgres } from './own-postgres.js';

interface Answer {
  route: string;
  status: number;
  retryAfter: string | null;
  code: string | null;
  requestId: string | null;
}

/**
 * The database stopped under a running instance (its own cluster, a fast shutdown: connections terminated,
 * new ones refused) and started again. Every route answers 503 service_unavailable with Retry-After in the
 * contract's shape (the API, the facade's fast lane and its Express path, /inbound), never 500; readiness
 * says unready; the log tells the outage once, then counts, then its end once; no inbound delivery that
 * was acknowledged is lost, and every refused one is stored when the upstream retries.
 */
describe('a database outage', () => {
  let own: OwnPostgres;
  let sandbox: SandboxServer;
  let app: SpawnedApp;
  let db: pg.Pool;
  const vaultKeys = testVaultKey('outage');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const receiverId = randomUUID();
  const inboundAuthorization = `Bearer ${randomBytes(24).toString('base64url')}`;
  let tenantKey = '';

  beforeAll(async () => {
    own = await startOwnPostgres();
    const databaseUrl = await own.createDatabase('cws_outage');
    db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    db.on('error', () => undefined);
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'] });
    app = await spawnApp(
      {
        DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-outage-')),
        DATABASE_URL: databaseUrl,
        DATABASE_POOL_SIZE: '5',
        SANDBOX: 'off',
        ...sandboxEnv(sandbox),
        VAULT_KEYS: vaultKeys,
        OPERATOR_API_KEY: operatorKey,
        LOG_LEVEL: 'warn',
      },
      { readyTimeoutMs: 60_000 },
    );
    const tenant = await call('POST', '/v1/tenants', operatorKey, {
      id: 'acme',
      name: 'Acme',
      environment: 'sandbox',
      allowedReturnUrls: ['http://localhost:5173/'],
    });
    expect(tenant.status).toBe(201);
    const key = await call('POST', '/v1/tenants/acme/api-keys', operatorKey, { name: 'outage' });
    tenantKey = ((await key.json()) as { key: string }).key;
    await seedConnections(db, vaultKeys, [
      { tenantId: 'acme', userId: 'u-alice', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
    ]);
    const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
    await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, 'acme', 'bearer', $2)`, [
      receiverId,
      await vault.seal(inboundAuthorization, receiverRef('acme', receiverId)),
    ]);
  }, 120_000);

  afterAll(async () => {
    await app?.stop('SIGTERM');
    await db?.end().catch(() => undefined);
    await sandbox?.close();
    await own?.destroy();
  }, 60_000);

  function call(method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${app.url}${path}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  const deliver = (n: number) =>
    call('POST', `/inbound/acme/${receiverId}`, null, { event: 'workflow.completed', n }, { authorization: inboundAuthorization });

  // One of each way in: the operator API, a tenant-key API route, the facade's fast lane, the same facade
  // route through Express (a trailing slash leaves the fast lane), and the upstream's deliveries.
  const routes: Array<{ route: string; send: (n: number) => Promise<Response> }> = [
    { route: 'api (operator)', send: () => call('GET', '/v1/tenants/acme', operatorKey) },
    { route: 'api (tenant key)', send: () => call('GET', '/v1/tenants/acme/connections', tenantKey) },
    {
      route: 'facade (fast lane)',
      send: () => call('GET', '/v1/tenants/acme/me', tenantKey, undefined, { 'x-user-id': `u-new-${randomUUID()}` }),
    },
    {
      route: 'facade (express)',
      send: () => call('GET', '/v1/tenants/acme/workflows/', tenantKey, undefined, { 'x-user-id': `u-new-${randomUUID()}` }),
    },
    { route: 'inbound', send: (n) => deliver(n) },
  ];

  async function answer(route: string, res: Response): Promise<Answer> {
    const text = await res.text();
    let code: string | null = null;
    let requestId: string | null = null;
    try {
      const parsed = JSON.parse(text) as { error?: { code?: string; requestId?: string } };
      code = parsed.error?.code ?? null;
      requestId = parsed.error?.requestId ?? null;
    } catch {
      /* not JSON */
    }
    return { route, status: res.status, retryAfter: res.headers.get('retry-after'), code, requestId };
  }

  it('answers 503 with Retry-After on every route, logs it once, recovers by itself and loses no delivery', async () => {
    expect((await deliver(0)).status).toBe(200); // the receiver's digest is now cached: during the outage only the INSERT fails
    const outputBefore = app.output.join('').length;

    await own.stop();
    const answers: Answer[] = [];
    const refusedDeliveries: number[] = [];
    const acceptedDeliveries: number[] = [];
    let n = 1;
    const outageEnds = Date.now() + 12_000;
    let ready: number[] = [];
    while (Date.now() < outageEnds) {
      const round = await Promise.all(
        routes.map(async (r) => {
          const k = n++;
          const a = await answer(r.route, await r.send(k));
          if (r.route === 'inbound') (a.status === 200 ? acceptedDeliveries : refusedDeliveries).push(k);
          return a;
        }),
      );
      answers.push(...round);
      ready.push((await fetch(`${app.url}/health/ready`)).status);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await fetch(`${app.url}/health/live`)).status).toBe(200);
    await own.start();

    // Back by itself: readiness turns 200 without a restart.
    const back = Date.now() + 20_000;
    for (;;) {
      if ((await fetch(`${app.url}/health/ready`)).status === 200) break;
      if (Date.now() > back) throw new Error('not ready again after the database came back');
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const r of routes) {
      const after = await answer(r.route, await r.send(n++));
      expect({ route: r.route, ok: after.status < 500 }).toEqual({ route: r.route, ok: true });
    }

    const byRoute = new Map<string, Record<string, number>>();
    for (const a of answers) {
      const counts = byRoute.get(a.route) ?? {};
      counts[`${a.status} ${a.code ?? ''}`.trim()] = (counts[`${a.status} ${a.code ?? ''}`.trim()] ?? 0) + 1;
      byRoute.set(a.route, counts);
    }
    ready = [...new Set(ready)];
    console.log(
      `during a 12 s outage, ${answers.length} calls: ${JSON.stringify(Object.fromEntries(byRoute))}; readiness answered ${ready.join(', ')}`,
    );

    // Every answer during the outage: a 503 in the contract's shape with Retry-After (never a 500), on every route.
    const wrong = answers.filter(
      (a) => !(a.status === 503 && a.code === 'service_unavailable' && a.retryAfter !== null && Number(a.retryAfter) > 0 && a.requestId),
    );
    expect(wrong.slice(0, 5)).toEqual([]);
    for (const r of routes) expect(answers.filter((a) => a.route === r.route).length).toBeGreaterThan(5);
    expect(ready).toEqual([503]);

    // The log: the outage once, its end once, a summary line at most every 10 s; no stack, no line per request.
    const log = app.output.join('').slice(outputBefore);
    const lines = log.split('\n').filter((l) => l.trim());
    const began = lines.filter((l) => l.includes('the database is unreachable'));
    const ended = lines.filter((l) => l.includes('the database is reachable again'));
    console.log(`log lines written during and after the outage: ${lines.length} (for ${answers.length} calls)`);
    if (lines.length >= 12)
      console.log(
        lines
          .slice(0, 24)
          .map((l) => l.slice(0, 300))
          .join('\n'),
      );
    expect(began).toHaveLength(1);
    expect(ended).toHaveLength(1);
    expect(log).not.toMatch(/\n\s+at /);
    expect(log).not.toContain('"stack"');
    expect(lines.length).toBeLessThan(12);

    // No acknowledged delivery lost; every refused one is stored once the upstream retries it.
    for (const k of refusedDeliveries) expect((await deliver(k)).status).toBe(200);
    const stored = await db.query<{ n: number }>(`SELECT (payload->>'n')::int AS n FROM events WHERE source = 'upstream'`);
    const storedNs = new Set(stored.rows.map((r) => r.n));
    const lost = [0, ...acceptedDeliveries, ...refusedDeliveries].filter((k) => !storedNs.has(k));
    console.log(
      `inbound: ${acceptedDeliveries.length} accepted and ${refusedDeliveries.length} refused during the outage; lost after retries: ${lost.length}`,
    );
    expect(refusedDeliveries.length).toBeGreaterThan(5);
    expect(lost).toEqual([]);
  }, 120_000);
});
