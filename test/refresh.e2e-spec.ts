import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError } from '../src/common/app-error.js';
import type { ConnectionEntity } from '../src/connections/store/connection.entity.js';
import { ConnectionsRepository } from '../src/connections/store/connections.repository.js';
import { RefreshScheduler } from '../src/refresh/refresh-scheduler.service.js';
import { RenewalService } from '../src/refresh/renewal.service.js';
import { newTenant } from './support/connect.js';
import { seedConnections, type IssuedPair } from './support/seed-connections.js';
import { startSecondInstance, startTestApp, testVaultKey, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

const TTL = 20;
const VAULT_KEYS = testVaultKey('refresh');

describe('token renewal (invariants 3 to 5)', () => {
  let a: TestApp;
  let b: TestApp;
  const issued: string[] = [];

  const env = {
    VAULT_KEYS,
    REFRESH_SCHEDULER: 'off',
    REFRESH_MARGIN_MS: '2000',
    REFRESH_LEASE_MS: '10000',
    UPSTREAM_TOKEN_TIMEOUT_MS: '2000',
    UPSTREAM_CONNECT_TIMEOUT_MS: '1000',
    LOG_LEVEL: 'info',
  };

  beforeAll(async () => {
    a = await startTestApp({ env, sandbox: { accessTokenTtlSeconds: TTL } });
    // A second instance on the same database and the same upstream: leases must work across instances.
    b = await startSecondInstance(a, env);
    await newTenant(a, 'acme');
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const issue = (userId: string): IssuedPair => {
    const pair = a.sandbox!.issueTokens(userId);
    issued.push(pair.access_token, pair.refresh_token);
    return pair;
  };
  const seedOne = async (upstreamUserId: string, partnerUserId: string, over: { dueAt?: Date } = {}) => {
    const tokens = issue(upstreamUserId);
    const [seeded] = await seedConnections(a.db, VAULT_KEYS, [
      { tenantId: 'acme', userId: partnerUserId, upstreamUserId, tokens, ...over },
    ]);
    return seeded;
  };
  const entity = async (app: TestApp, id: string): Promise<ConnectionEntity> =>
    (await app.app.get(ConnectionsRepository).findInTenant('acme', id))!;
  const row = async (id: string) =>
    (
      await a.db.query<{
        status: string;
        status_reason: string | null;
        version: string;
        refresh_failures: number;
        refresh_due_at: Date | null;
        lease_owner: string | null;
        last_refreshed_at: Date | null;
        access_token_expires_at: Date;
      }>(
        'SELECT status, status_reason, version, refresh_failures, refresh_due_at, lease_owner, last_refreshed_at, access_token_expires_at FROM connections WHERE id = $1',
        [id],
      )
    ).rows[0];
  const refreshesOf = (family: string) => a.sandbox!.refreshLog().filter((r) => r.family === family);
  const userinfo = (token: string) => fetch(`${a.sandbox!.url}/userinfo`, { headers: { authorization: `Bearer ${token}` } });

  it('100 concurrent calls on two instances for a just-expired token: one renewal, one new token for all', async () => {
    const seeded = await seedOne('alice', 'u-storm');
    await a.db.query(`UPDATE connections SET access_token_expires_at = now() - interval '1 second' WHERE id = $1`, [seeded.id]);
    const [ea, eb] = [await entity(a, seeded.id), await entity(b, seeded.id)];
    const ra = a.app.get(RenewalService);
    const rb = b.app.get(RenewalService);
    const started = Date.now();
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? ra.accessTokenFor(ea) : rb.accessTokenFor(eb))));
    const elapsed = Date.now() - started;

    expect(refreshesOf(seeded.family)).toHaveLength(1);
    expect(new Set(results.map((r) => r.accessToken)).size).toBe(1);
    expect(new Set(results.map((r) => r.version)).size).toBe(1);
    const after = await row(seeded.id);
    expect(Number(after.version)).toBe(results[0].version);
    expect(after.lease_owner).toBeNull();
    // Expiry from expiresIn, not a constant: TTL seconds after the renewal.
    expect(after.access_token_expires_at.getTime()).toBeGreaterThanOrEqual(started + TTL * 1000 - 1000);
    expect(after.access_token_expires_at.getTime()).toBeLessThanOrEqual(Date.now() + TTL * 1000 + 1000);
    expect((await userinfo(results[0].accessToken)).status).toBe(200);
    expect(a.sandbox!.stats().refreshReuses).toBe(0);
    issued.push(results[0].accessToken);
    console.log(`100 concurrent calls on 2 instances: 1 upstream refresh, ${elapsed} ms`);
  });

  it('a fresh token is used as it is; a 401 on a version renews once, a 401 on an older version does not', async () => {
    const seeded = await seedOne('alice', 'u-fresh');
    const renewal = a.app.get(RenewalService);
    const e = await entity(a, seeded.id);
    const first = await renewal.accessTokenFor(e);
    expect(refreshesOf(seeded.family)).toHaveLength(0);
    expect((await userinfo(first.accessToken)).status).toBe(200);

    const renewed = await Promise.all([
      renewal.renewAfterRejection(e, first.version),
      b.app.get(RenewalService).renewAfterRejection(e, first.version),
    ]);
    expect(refreshesOf(seeded.family)).toHaveLength(1);
    expect(renewed[0].version).toBe(first.version + 1);
    expect(renewed[1].accessToken).toBe(renewed[0].accessToken);
    // A late 401 for the old version: the row already moved past it, so no second renewal.
    const late = await renewal.renewAfterRejection(e, first.version);
    expect(late.accessToken).toBe(renewed[0].accessToken);
    expect(refreshesOf(seeded.family)).toHaveLength(1);
    issued.push(renewed[0].accessToken);
  });

  it('the scheduler on two instances claims disjoint batches (SKIP LOCKED): each due connection renewed exactly once', async () => {
    const dueAt = new Date(Date.now() - 1000);
    const items = Array.from({ length: 150 }, (_, i) => ({
      tenantId: 'acme',
      userId: `u-batch-${i}`,
      upstreamUserId: ['alice', 'bob', 'carol', 'dave'][i % 4],
      tokens: issue(['alice', 'bob', 'carol', 'dave'][i % 4]),
      dueAt,
    }));
    const seeded = await seedConnections(a.db, VAULT_KEYS, items);
    const [na, nb] = await Promise.all([a.app.get(RefreshScheduler).runOnce(), b.app.get(RefreshScheduler).runOnce()]);
    expect(na + nb).toBeGreaterThanOrEqual(150);
    for (const s of seeded) expect(refreshesOf(s.family)).toHaveLength(1);
    const rows = await a.db.query(
      `SELECT count(*)::int AS n FROM connections WHERE user_id LIKE 'u-batch-%' AND version = 2 AND lease_owner IS NULL AND refresh_due_at > now()`,
    );
    expect(rows.rows[0].n).toBe(150);
    expect(a.sandbox!.stats().refreshReuses).toBe(0);
  });

  it('invalid_grant: reauth_required with its reason, the event in the same transaction, 409 on use', async () => {
    const seeded = await seedOne('bob', 'u-revoked');
    const e = await entity(a, seeded.id);
    a.sandbox!.revokeUser('bob');
    const res = await a.request<ErrorBody>('POST', `/v1/tenants/acme/connections/${seeded.id}/refresh`);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('reauth_required');
    expect(typeof res.body.error.requestId).toBe('string');
    const after = await row(seeded.id);
    expect(after).toMatchObject({
      status: 'reauth_required',
      status_reason: 'refresh_token_rejected',
      lease_owner: null,
      refresh_due_at: null,
    });
    const events = await a.db.query(`SELECT type, payload FROM events WHERE tenant_id = 'acme' AND type = 'connection.reauth_required'`);
    expect(events.rows).toHaveLength(1);
    expect(events.rows[0].payload).toMatchObject({ connectionId: seeded.id, userId: 'u-revoked', reason: 'refresh_token_rejected' });

    // Fails fast: no more token calls for it, whatever the caller holds.
    const tokenCalls = a.sandbox!.stats().tokenRequests;
    const codeOf = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (err: unknown) => (err instanceof AppError ? err.code : 'other error'),
      );
    expect(await codeOf(a.app.get(RenewalService).accessTokenFor(await entity(a, seeded.id)))).toBe('reauth_required');
    // A caller still holding the entity from before (a cache) learns it at its next 401.
    expect(await codeOf(a.app.get(RenewalService).renewAfterRejection(e, e.version))).toBe('reauth_required');
    const again = await a.request<ErrorBody>('POST', `/v1/tenants/acme/connections/${seeded.id}/refresh`);
    expect(again.status).toBe(409);
    expect(a.sandbox!.stats().tokenRequests).toBe(tokenCalls);
    const shown = await a.request<{ status: string; statusReason: string }>('GET', `/v1/tenants/acme/connections/${seeded.id}`);
    expect(shown.body).toMatchObject({ status: 'reauth_required', statusReason: 'refresh_token_rejected' });
  });

  it('an upstream outage backs off (never reauth_required), keeps serving the working token, and renews once it clears', async () => {
    const seeded = await seedOne('carol', 'u-outage', { dueAt: new Date(Date.now() - 1000) });
    const scheduler = a.app.get(RefreshScheduler);
    const sandbox = a.sandbox!;
    try {
      sandbox.setFault({ mode: 'status', status: 503, retryAfterSeconds: 0, paths: ['/oauth/token'] });
      await scheduler.runOnce();
      let r = await row(seeded.id);
      expect(r).toMatchObject({ status: 'active', refresh_failures: 1, lease_owner: null });
      expect(r.refresh_due_at!.getTime()).toBeGreaterThan(Date.now());

      sandbox.setFault({ mode: 'down', paths: ['/oauth/token'] });
      await a.db.query(`UPDATE connections SET refresh_due_at = now() WHERE id = $1`, [seeded.id]);
      await scheduler.runOnce();
      r = await row(seeded.id);
      expect(r).toMatchObject({ status: 'active', refresh_failures: 2, lease_owner: null });

      const forced = await a.request<ErrorBody>('POST', `/v1/tenants/acme/connections/${seeded.id}/refresh`);
      expect(forced.status).toBe(502);
      expect(forced.body.error.code).toBe('upstream_unavailable');
      // Within the margin but not expired: the working token still serves the call.
      await a.db.query(`UPDATE connections SET access_token_expires_at = now() + interval '1 second' WHERE id = $1`, [seeded.id]);
      const served = await a.app.get(RenewalService).accessTokenFor(await entity(a, seeded.id));
      expect((await userinfo(served.accessToken)).status).toBe(200);
    } finally {
      sandbox.setFault(null);
    }
    const r = await row(seeded.id);
    expect(r.status).toBe('active');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, r.refresh_due_at!.getTime() - Date.now()) + 50));
    await scheduler.runOnce();
    const healed = await row(seeded.id);
    expect(healed).toMatchObject({ status: 'active', refresh_failures: 0, lease_owner: null });
    expect(healed.last_refreshed_at).not.toBeNull();
    expect(refreshesOf(seeded.family)).toHaveLength(1);
    const reauth = await a.db.query(
      `SELECT count(*)::int AS n FROM events WHERE type = 'connection.reauth_required' AND payload->>'connectionId' = $1`,
      [seeded.id],
    );
    expect(reauth.rows[0].n).toBe(0);
  });

  it('the forced refresh answers 200 with the connection; /metrics reports renewals', async () => {
    const seeded = await seedOne('dave', 'u-forced');
    const res = await a.request<{ id: string; status: string; lastRefreshedAt: string; accessTokenExpiresAt: string }>(
      'POST',
      `/v1/tenants/acme/connections/${seeded.id}/refresh`,
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: seeded.id, status: 'active' });
    expect(Date.parse(res.body.lastRefreshedAt)).toBeGreaterThan(Date.now() - 10_000);
    expect(refreshesOf(seeded.family)).toHaveLength(1);
    expect((await a.request('POST', `/v1/tenants/acme/connections/00000000-0000-4000-8000-000000000000/refresh`)).status).toBe(404);

    const metrics = await a.request<string>('GET', '/metrics', { key: null });
    expect(metrics.text).toMatch(/cws_refresh_total\{outcome="success"\} [1-9]/);
    expect(metrics.text).toContain('cws_refresh_total{outcome="reauth_required"}');
    expect(metrics.text).toContain('cws_refresh_duration_seconds_bucket');
    expect(metrics.text).toMatch(/cws_refresh_overdue_seconds \d/);
  });

  it('no token appears in any log line, answer or event', async () => {
    const list = await a.request('GET', '/v1/tenants/acme/connections');
    const events = await a.db.query(`SELECT coalesce(json_agg(e)::text, '') AS j FROM events e`);
    const everything = a.logs.join('') + b.logs.join('') + list.text + events.rows[0].j;
    expect(issued.length).toBeGreaterThan(10);
    for (const token of issued) expect(everything).not.toContain(token);
  });
});
