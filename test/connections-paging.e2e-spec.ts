import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConnectionHealthRepository } from '../src/connections/store/connection-health.repository.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { seedConnections, type IssuedPair } from './support/seed-connections.js';
import { expectDocumented } from './support/openapi.js';
import { startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface Connection {
  id: string;
  kind: string;
  userId: string | null;
  status: string;
  lastError: { code: string; at: string } | null;
  createdAt: string;
}
interface Page {
  connections: Connection[];
  next: string | null;
}
interface Renewal {
  at: string;
  outcome: string;
  error: string | null;
  durationMs: number;
}

const VAULT_KEYS = testVaultKey('paging');
const SEEDED = 1234;

describe('connections at scale: keyset pages, filters, lastError and renewal history (API.md section 6)', () => {
  let t: TestApp;
  let seededIds: string[] = [];
  let pair: IssuedPair;

  const page = (tenant: string, query: string) => t.request<Page>('GET', `/v1/tenants/${tenant}/connections${query}`);

  beforeAll(async () => {
    t = await startTestApp({
      env: { VAULT_KEYS, REFRESH_SCHEDULER: 'off', UPSTREAM_TOKEN_TIMEOUT_MS: '2000', UPSTREAM_CONNECT_TIMEOUT_MS: '1000' },
    });
    await newTenant(t, 'big');
    await newTenant(t, 'other');
    pair = t.sandbox!.issueTokens('alice');
    // Rows in groups with one creation time each: the order must break ties by id, and no row may be lost or repeated.
    const base = Date.now() - 3_600_000;
    const items = Array.from({ length: SEEDED }, (_, i) => ({
      tenantId: 'big',
      userId: `u-${i}`,
      upstreamUserId: 'alice',
      tokens: pair,
      issuedAt: new Date(base + Math.floor(i / 7) * 1000),
    }));
    seededIds = (await seedConnections(t.db, VAULT_KEYS, items)).map((s) => s.id);
    await seedConnections(t.db, VAULT_KEYS, [{ tenantId: 'other', userId: 'u-0', upstreamUserId: 'alice', tokens: pair }]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('pages through every connection exactly once, in a stable order, with next null on the last page', async () => {
    const seen: Connection[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const res: Awaited<ReturnType<typeof page>> = await page('big', `?limit=100${after ? `&after=${after}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.connections);
      after = res.body.next;
      pages++;
      expect(res.body.connections.length).toBe(after ? 100 : SEEDED % 100);
    } while (after);
    expect(pages).toBe(Math.ceil(SEEDED / 100));
    expect(seen.map((c) => c.id).sort()).toEqual([...seededIds].sort());
    expect(new Set(seen.map((c) => c.id)).size).toBe(SEEDED);
    const order = [...seen].sort((x, y) => (x.createdAt === y.createdAt ? (x.id < y.id ? -1 : 1) : x.createdAt < y.createdAt ? -1 : 1));
    expect(seen.map((c) => c.id)).toEqual(order.map((c) => c.id));
    // The same request gives the same page.
    const again = await page('big', '?limit=100');
    const first = await page('big', '?limit=100');
    expect(again.body).toEqual(first.body);
    expect(seen.every((c) => c.lastError === null)).toBe(true);
    expect(JSON.stringify(seen)).not.toContain(pair.access_token);
    expect(JSON.stringify(seen)).not.toContain(pair.refresh_token);
  });

  it('defaults to 100 and accepts 1 to 500; anything else is 400 validation_failed', async () => {
    expect((await page('big', '')).body.connections).toHaveLength(100);
    expect((await page('big', '?limit=500')).body.connections).toHaveLength(500);
    expect((await page('big', '?limit=1')).body.connections).toHaveLength(1);
    for (const bad of ['0', '501', '-1', 'abc', '1.5', '']) {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/big/connections?limit=${bad}`);
      expect([bad, res.status]).toEqual([bad, 400]);
      expect(res.body.error.code).toBe('validation_failed');
    }
    for (const bad of ['kind=robot', 'status=broken', 'environment=mars', 'colour=blue']) {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/big/connections?${bad}`);
      expect([bad, res.status, res.body.error.code]).toEqual([bad, 400, 'validation_failed']);
    }
  });

  it('a cursor that was altered, cut, made up or given for another tenant is 400 validation_failed', async () => {
    const next = (await page('big', '?limit=3')).body.next!;
    const decoded = Buffer.from(next, 'base64url').toString('utf8');
    const flipped = next.slice(0, 10) + (next[10] === 'A' ? 'B' : 'A') + next.slice(11);
    const otherId = decoded.replace(/\|([0-9a-f])/, (_, d: string) => `|${d === '0' ? '1' : '0'}`);
    const otherTime = decoded.replace(/:(\d\d)\./, (_, s: string) => `:${s === '00' ? '01' : '00'}.`);
    const forged = [
      flipped,
      next.slice(0, -4),
      'garbage',
      'x'.repeat(300),
      Buffer.from(otherId).toString('base64url'),
      Buffer.from(otherTime).toString('base64url'),
      `${next}=`,
      '%00',
    ];
    for (const bad of forged) {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/big/connections?after=${encodeURIComponent(bad)}`);
      expect([bad, res.status]).toEqual([bad, 400]);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const cross = await t.request<ErrorBody>('GET', `/v1/tenants/other/connections?after=${next}`);
    expect(cross.status).toBe(400);
  });

  it('filters by userId, kind, status and environment, and pages a filtered listing', async () => {
    const one = await page('big', '?userId=u-42');
    expect(one.body.connections.map((c) => c.userId)).toEqual(['u-42']);
    expect(one.body.next).toBeNull();
    expect((await page('big', '?userId=nobody')).body).toEqual({ connections: [], next: null });
    expect((await page('big', '?kind=admin')).body.connections).toEqual([]);
    expect((await page('big', '?kind=user&limit=5')).body.connections).toHaveLength(5);
    expect((await page('big', '?environment=sandbox&limit=5')).body.connections).toHaveLength(5);
    expect((await page('big', '?environment=eu')).body).toEqual({ connections: [], next: null });

    const broken = seededIds.filter((_, i) => i % 100 === 7);
    await t.db.query(
      `UPDATE connections SET status = 'reauth_required', status_reason = 'refresh_token_rejected' WHERE id = ANY($1::uuid[])`,
      [broken],
    );
    const found: string[] = [];
    let after: string | null = null;
    do {
      const res: Awaited<ReturnType<typeof page>> = await page('big', `?status=reauth_required&limit=5${after ? `&after=${after}` : ''}`);
      expect(res.body.connections.every((c) => c.status === 'reauth_required')).toBe(true);
      found.push(...res.body.connections.map((c) => c.id));
      after = res.body.next;
    } while (after);
    expect(found.sort()).toEqual([...broken].sort());
    const active = await page('big', '?status=active&limit=500');
    expect(active.body.connections.some((c) => broken.includes(c.id))).toBe(false);
  });

  it('an unknown tenant is 404 tenant_not_found; a tenant key sees only its own tenant', async () => {
    const res = await t.request<ErrorBody>('GET', '/v1/tenants/nope/connections');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('tenant_not_found');
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/other/api-keys', { body: { name: 'partner' } });
    const own = await t.request<Page>('GET', '/v1/tenants/other/connections', { key: key.body.key });
    expect(own.body.connections).toHaveLength(1);
    expect((await t.request('GET', '/v1/tenants/big/connections', { key: key.body.key })).status).toBe(404);
  });

  it('a failed renewal sets lastError and a history entry; a successful one clears it; the history keeps the last 20', async () => {
    const tokens = t.sandbox!.issueTokens('bob');
    const [c] = await seedConnections(t.db, VAULT_KEYS, [{ tenantId: 'other', userId: 'u-health', upstreamUserId: 'bob', tokens }]);
    const sandbox = t.sandbox!;
    try {
      sandbox.setFault({ mode: 'status', status: 503, retryAfterSeconds: 0, paths: ['/oauth/token'] });
      const forced = await t.request<ErrorBody>('POST', `/v1/tenants/other/connections/${c.id}/refresh`);
      expect(forced.status).toBe(502);
    } finally {
      sandbox.setFault(null);
    }
    const failed = await waitUntil('lastError', async () => {
      const r = await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`);
      return r.body.lastError ? r.body : null;
    });
    expect(failed.lastError!.code).toBe('upstream_unavailable');
    expect(Date.parse(failed.lastError!.at)).toBeGreaterThan(Date.now() - 60_000);
    const listed = await page('other', '?userId=u-health');
    expect(listed.body.connections[0].lastError).toEqual(failed.lastError);

    expect((await t.request('POST', `/v1/tenants/other/connections/${c.id}/refresh`)).status).toBe(200);
    await waitUntil(
      'lastError cleared',
      async () => (await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`)).body.lastError === null,
    );
    const history = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
    expect(history.status).toBe(200);
    expect(history.body.renewals.map((r) => [r.outcome, r.error])).toEqual([
      ['renewed', null],
      ['failed', 'upstream_unavailable'],
    ]);
    expect(history.body.renewals.every((r) => Number.isInteger(r.durationMs) && r.durationMs >= 0)).toBe(true);

    for (let i = 0; i < 22; i++) expect((await t.request('POST', `/v1/tenants/other/connections/${c.id}/refresh`)).status).toBe(200);
    const bounded = await waitUntil('24 renewals recorded, 20 kept', async () => {
      const r = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
      const row = await t.db.query<{ n: number }>(`SELECT cardinality(renewal_at) AS n FROM connection_health WHERE connection_id = $1`, [
        c.id,
      ]);
      return r.body.renewals.length === 20 && row.rows[0].n === 20 && r.body.renewals.every((x) => x.outcome === 'renewed')
        ? r.body.renewals
        : null;
    });
    const times = bounded.map((r) => Date.parse(r.at));
    expect([...times].sort((x, y) => y - x)).toEqual(times);
  });

  it('a rejected refresh token: reauth_required with lastError refresh_token_rejected, cleared by a reconnect', async () => {
    const tokens = t.sandbox!.issueTokens('carol');
    const [c] = await seedConnections(t.db, VAULT_KEYS, [{ tenantId: 'other', userId: 'carol', upstreamUserId: 'carol', tokens }]);
    t.sandbox!.revokeUser('carol');
    expect((await t.request('POST', `/v1/tenants/other/connections/${c.id}/refresh`)).status).toBe(409);
    const shown = await waitUntil('reauth lastError', async () => {
      const r = await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`);
      return r.body.lastError ? r.body : null;
    });
    expect(shown).toMatchObject({ status: 'reauth_required', lastError: { code: 'refresh_token_rejected' } });
    const history = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
    expect(history.body.renewals[0]).toMatchObject({ outcome: 'reauth_required', error: 'refresh_token_rejected' });

    const back = await connectViaHttp(t, 'other', { userId: 'carol', as: 'carol' });
    expect(back).toMatchObject({ status: 'connected', connectionId: c.id });
    const recovered = await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`);
    expect(recovered.body).toMatchObject({ status: 'active', lastError: null });
  });

  it('outcomes of one connection that share a group commit are all kept; the newest decides lastError', async () => {
    const repo = t.app.get(ConnectionHealthRepository);
    const id = seededIds[5];
    const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
    // All three are written in one flush, out of order.
    await Promise.all([
      repo.recordRenewal(id, { at: at(1), outcome: 'failed', error: 'upstream_timeout', durationMs: 5 }),
      repo.recordRenewal(id, { at: at(3), outcome: 'failed', error: 'upstream_unavailable', durationMs: 7 }),
      repo.recordRenewal(id, { at: at(2), outcome: 'renewed', error: null, durationMs: 6 }),
    ]);
    const history = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/big/connections/${id}/renewals`);
    expect(history.body.renewals.map((r) => [r.at, r.outcome, r.error])).toEqual([
      [at(3).toISOString(), 'failed', 'upstream_unavailable'],
      [at(2).toISOString(), 'renewed', null],
      [at(1).toISOString(), 'failed', 'upstream_timeout'],
    ]);
    const shown = await t.request<Connection>('GET', `/v1/tenants/big/connections/${id}`);
    expect(shown.body.lastError).toEqual({ code: 'upstream_unavailable', at: at(3).toISOString() });
    // A connection deleted meanwhile is skipped, not an error for the others.
    await expect(
      repo.recordRenewal('00000000-0000-4000-8000-000000000000', { at: at(4), outcome: 'renewed', error: null, durationMs: 1 }),
    ).resolves.toBeUndefined();
  });

  it('a renewed pair is saved with its line; a failure recorded after the fact that is older goes behind it and leaves lastError alone', async () => {
    const repo = t.app.get(ConnectionHealthRepository);
    const tokens = t.sandbox!.issueTokens('bob');
    const [c] = await seedConnections(t.db, VAULT_KEYS, [{ tenantId: 'other', userId: 'u-order', upstreamUserId: 'bob', tokens }]);
    const before = Date.now();
    expect((await t.request('POST', `/v1/tenants/other/connections/${c.id}/refresh`)).status).toBe(200);
    // No flush to wait for: the line was committed with the pair, before the answer.
    const saved = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
    expect(saved.body.renewals).toEqual([{ at: expect.any(String), outcome: 'renewed', error: null, durationMs: expect.any(Number) }]);
    const renewedAt = Date.parse(saved.body.renewals[0].at);
    expect(renewedAt).toBeGreaterThanOrEqual(before - 1000);

    await repo.recordRenewal(c.id, { at: new Date(renewedAt - 5000), outcome: 'failed', error: 'upstream_timeout', durationMs: 3 });
    const behind = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
    expect(behind.body.renewals.map((r) => [r.outcome, r.error])).toEqual([
      ['renewed', null],
      ['failed', 'upstream_timeout'],
    ]);
    expect((await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`)).body.lastError).toBeNull();

    const later = new Date(renewedAt + 5000);
    await repo.recordRenewal(c.id, { at: later, outcome: 'failed', error: 'upstream_unavailable', durationMs: 4 });
    const front = await t.request<{ renewals: Renewal[] }>('GET', `/v1/tenants/other/connections/${c.id}/renewals`);
    expect(front.body.renewals.map((r) => [r.outcome, r.error])).toEqual([
      ['failed', 'upstream_unavailable'],
      ['renewed', null],
      ['failed', 'upstream_timeout'],
    ]);
    expect((await t.request<Connection>('GET', `/v1/tenants/other/connections/${c.id}`)).body.lastError).toEqual({
      code: 'upstream_unavailable',
      at: later.toISOString(),
    });
  });

  it('renewals of an unknown connection or tenant are 404', async () => {
    const none = await t.request<ErrorBody>('GET', '/v1/tenants/other/connections/00000000-0000-4000-8000-000000000000/renewals');
    expect([none.status, none.body.error.code]).toEqual([404, 'connection_not_found']);
    const wrongTenant = await t.request<ErrorBody>('GET', `/v1/tenants/other/connections/${seededIds[0]}/renewals`);
    expect(wrongTenant.status).toBe(404);
    const notUuid = await t.request<ErrorBody>('GET', '/v1/tenants/other/connections/abc/renewals');
    expect(notUuid.status).toBe(404);
  });

  it("the OpenAPI document describes each operation: summary, security, errors in the contract's shape", async () => {
    await expectDocumented(t, '/v1/tenants/{tenantId}/connections', 'get', ['400', '401', '404']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/connections/{connectionId}', 'get', ['401', '404']);
    await expectDocumented(t, '/v1/tenants/{tenantId}/connections/{connectionId}/renewals', 'get', ['401', '404']);
  });
});
