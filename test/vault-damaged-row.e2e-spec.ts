import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parseVaultKeys } from '../src/config/app-config.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { newTenant } from './support/connect.js';
import { seedConnections, type IssuedPair, type SeededConnection } from './support/seed-connections.js';
import { startSecondInstance, startTestApp, testVaultKey, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}

interface ConnectionBody {
  status: string;
  statusReason: string | null;
  lastError: { code: string; at: string } | null;
}

const VAULT_KEYS = testVaultKey('rows');

/** Flips one character inside the GCM tag of a sealed column (5 from the end): the value no longer opens. */
const flipSql = (table: string, column: string) =>
  `UPDATE ${table} SET ${column} = overlay(${column} placing
     (CASE WHEN substr(${column}, length(${column}) - 4, 1) = 'A' THEN 'B' ELSE 'A' END) from length(${column}) - 4 for 1)
   WHERE id = $1 RETURNING ${column} AS value`;

async function until<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== null) return got;
    if (Date.now() > deadline) throw new Error(`${what}: not in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Issue 44, "One bad row is one tenant's problem": two instances on one database; a connection's sealed token
 * damaged in SQL (bytes flipped), a webhook receiver's and an events secret too. Both instances stay ready,
 * only the owner of the damaged value gets an error (with a stable code), counted and logged, and the
 * connection is marked reauth_required (token_unreadable) with its event; everything else works.
 */
describe('a stored secret that does not open is its owner problem, not the instance', () => {
  let a: TestApp;
  let b: TestApp;
  const issued: string[] = [];
  const damaged: string[] = [];
  const env = {
    VAULT_KEYS,
    REFRESH_SCHEDULER: 'off',
    LOG_LEVEL: 'info',
    EVENTS_POLL_INTERVAL_MS: '500',
    EVENTS_RELAY_INTERVAL_MS: '100',
    EVENTS_RETRY_BASE_MS: '200',
    EVENTS_RETRY_MAX_MS: '400',
  };
  let sink: WebhookSink;
  let bad: SeededConnection;
  let badRefresh: SeededConnection;
  let good: SeededConnection;
  let other: SeededConnection;

  const issue = (user: string): IssuedPair => {
    const pair = a.sandbox!.issueTokens(user);
    issued.push(pair.access_token, pair.refresh_token);
    return pair;
  };
  const me = (t: TestApp, tenant: string, userId: string) =>
    t.request<ErrorBody>('GET', `/v1/tenants/${tenant}/me`, { headers: { 'x-user-id': userId } });
  const failures = async (t: TestApp, column: string): Promise<number> => {
    const text = (await t.request('GET', '/metrics', { key: null })).text;
    const m = new RegExp(`^cws_vault_open_failures_total\\{table="[a-z_]+",column="${column}"\\} (\\d+)$`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  };
  const ready = async () => Promise.all([a, b].map(async (t) => (await t.request('GET', '/health/ready', { key: null })).status));

  beforeAll(async () => {
    sink = await WebhookSink.start();
    a = await startTestApp({ env });
    b = await startSecondInstance(a, env);
    await newTenant(a, 'acme');
    await newTenant(a, 'globex');
    [bad, badRefresh, good] = await seedConnections(a.db, VAULT_KEYS, [
      { tenantId: 'acme', userId: 'u-bad', upstreamUserId: 'alice', tokens: issue('alice') },
      { tenantId: 'acme', userId: 'u-bad-refresh', upstreamUserId: 'carol', tokens: issue('carol') },
      { tenantId: 'acme', userId: 'u-good', upstreamUserId: 'bob', tokens: issue('bob') },
    ]);
    [other] = await seedConnections(a.db, VAULT_KEYS, [
      { tenantId: 'globex', userId: 'u-other', upstreamUserId: 'dave', tokens: issue('dave') },
    ]);
    damaged.push((await a.db.query<{ value: string }>(flipSql('connections', 'access_token_enc'), [bad.id])).rows[0].value);
    damaged.push((await a.db.query<{ value: string }>(flipSql('connections', 'refresh_token_enc'), [badRefresh.id])).rows[0].value);
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await sink?.close();
  });

  it("a damaged access token: that connection's calls fail with 409 reauth_required, both instances stay ready, the rest works", async () => {
    const first = await me(a, 'acme', 'u-bad');
    expect(first.status).toBe(409);
    expect(first.body.error).toMatchObject({ code: 'reauth_required', details: { reason: 'token_unreadable' } });
    const second = await me(b, 'acme', 'u-bad');
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('reauth_required');
    expect(await ready()).toEqual([200, 200]);
    for (const t of [a, b]) {
      expect((await me(t, 'acme', 'u-good')).status).toBe(200);
      expect((await me(t, 'globex', 'u-other')).status).toBe(200);
    }
    // Opened once: the instance that met it marked the connection, the other read the mark.
    expect((await failures(a, 'access_token_enc')) + (await failures(b, 'access_token_enc'))).toBe(1);
    const shown = await until('lastError', async () => {
      const c = await b.request<ConnectionBody>('GET', `/v1/tenants/acme/connections/${bad.id}`);
      return c.body.lastError ? c.body : null;
    });
    expect(shown).toMatchObject({ status: 'reauth_required', statusReason: 'token_unreadable', lastError: { code: 'token_unreadable' } });
    const events = await a.db.query<{ payload: { reason?: string; connectionId: string } }>(
      `SELECT payload FROM events WHERE tenant_id = 'acme' AND type = 'connection.reauth_required'`,
    );
    expect(events.rows.map((r) => r.payload)).toEqual([expect.objectContaining({ connectionId: bad.id, reason: 'token_unreadable' })]);
    const untouched = await a.request<ConnectionBody>('GET', `/v1/tenants/acme/connections/${good.id}`);
    expect(untouched.body).toMatchObject({ status: 'active', lastError: null });
    expect((await a.request<ConnectionBody>('GET', `/v1/tenants/globex/connections/${other.id}`)).body.status).toBe('active');
  });

  it('a damaged refresh token: a forced renewal fails with 409 reauth_required, sends nothing upstream, marks the connection', async () => {
    const family = a.sandbox!.refreshLog().length;
    const res = await b.request<ErrorBody>('POST', `/v1/tenants/acme/connections/${badRefresh.id}/refresh`);
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'reauth_required', details: { reason: 'token_unreadable' } });
    expect(a.sandbox!.refreshLog()).toHaveLength(family);
    expect((await failures(b, 'refresh_token_enc')) + (await failures(a, 'refresh_token_enc'))).toBe(1);
    const row = await a.db.query<{ status: string; status_reason: string; lease_owner: string | null }>(
      'SELECT status, status_reason, lease_owner FROM connections WHERE id = $1',
      [badRefresh.id],
    );
    expect(row.rows[0]).toEqual({ status: 'reauth_required', status_reason: 'token_unreadable', lease_owner: null });
    // A forced renewal of a sound connection still works, on either instance.
    expect((await a.request('POST', `/v1/tenants/acme/connections/${good.id}/refresh`)).status).toBe(200);
    expect(await ready()).toEqual([200, 200]);
  });

  it("a damaged receiver secret: that receiver's deliveries answer 409 secret_unreadable; another receiver works", async () => {
    const vault = new TokenVault({ vaultKeys: parseVaultKeys(VAULT_KEYS) });
    const receivers: Array<{ id: string; auth: string }> = [];
    for (let i = 0; i < 2; i++) {
      const id = randomUUID();
      const auth = `Bearer ${randomBytes(32).toString('base64url')}`;
      const sealed = await vault.seal(auth, { table: 'webhook_receivers', id, column: 'secret_enc', tenantId: 'acme' });
      await a.db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, 'acme', 'bearer', $2)`, [
        id,
        sealed,
      ]);
      receivers.push({ id, auth });
      issued.push(auth);
    }
    damaged.push((await a.db.query<{ value: string }>(flipSql('webhook_receivers', 'secret_enc'), [receivers[0].id])).rows[0].value);
    const deliver = (t: TestApp, r: { id: string; auth: string }) =>
      t.request<ErrorBody>('POST', `/inbound/acme/${r.id}`, {
        key: null,
        headers: { authorization: r.auth },
        body: { event: 'workflow_step_updated' },
      });
    for (const t of [a, b]) {
      const refused = await deliver(t, receivers[0]);
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('secret_unreadable');
      expect((await deliver(t, receivers[1])).status).toBe(200);
    }
    expect((await failures(a, 'secret_enc')) + (await failures(b, 'secret_enc'))).toBe(2);
    expect(await ready()).toEqual([200, 200]);
  });

  it('a damaged events secret: a rotation with overlap answers 409 secret_unreadable, one without replaces it', async () => {
    damaged.push((await a.db.query<{ value: string }>(flipSql('tenants', 'events_secret_enc'), ['globex'])).rows[0].value);
    const overlap = await a.request<ErrorBody>('POST', '/v1/tenants/globex/events-secret', { body: { overlapSeconds: 60 } });
    expect(overlap.status).toBe(409);
    expect(overlap.body.error.code).toBe('secret_unreadable');
    const replaced = await b.request<{ eventsSecret: string }>('POST', '/v1/tenants/globex/events-secret', { body: {} });
    expect(replaced.status).toBe(201);
    issued.push(replaced.body.eventsSecret);
    expect((await a.request<ErrorBody>('POST', '/v1/tenants/globex/events-secret', { body: { overlapSeconds: 60 } })).status).toBe(201);
    expect(await ready()).toEqual([200, 200]);
  });

  it('logs one line per value that did not open, naming where, never a secret', () => {
    const lines = [...a.logs, ...b.logs]
      .join('')
      .split('\n')
      .filter((l) => l.includes('a stored secret does not open'));
    // access token, refresh token, one receiver on each instance, the events secret.
    expect(lines).toHaveLength(5);
    const keyText = parseVaultKeys(VAULT_KEYS)[0].key.toString('base64');
    const all = [...a.logs, ...b.logs].join('');
    for (const leak of [...issued, ...damaged, keyText]) expect(all).not.toContain(leak);
  });

  it('an event whose signing secret does not open is not sent, and is delivered once the secret is replaced', async () => {
    await newTenant(a, 'initech', { eventsTargetUrl: sink.url });
    damaged.push((await a.db.query<{ value: string }>(flipSql('tenants', 'events_secret_enc'), ['initech'])).rows[0].value);
    // An event of the tenant's own: its connection's tokens do not open either.
    const [c] = await seedConnections(a.db, VAULT_KEYS, [
      { tenantId: 'initech', userId: 'u-i', upstreamUserId: 'bob', tokens: issue('bob') },
    ]);
    await a.db.query(flipSql('connections', 'access_token_enc'), [c.id]);
    expect((await me(a, 'initech', 'u-i')).status).toBe(409);
    const event = await until('the event', async () => {
      const r = await a.db.query<{ id: string }>(
        `SELECT id FROM events WHERE tenant_id = 'initech' AND type = 'connection.reauth_required'`,
      );
      return r.rows[0]?.id ?? null;
    });
    await until('a failed attempt', async () => {
      const r = await a.db.query<{ error: string }>(`SELECT error FROM event_attempts WHERE event_id = $1`, [event]);
      return r.rows.length > 0 ? r.rows : null;
    });
    const attempts = await a.db.query<{ error: string; status: number | null }>(
      `SELECT error, status FROM event_attempts WHERE event_id = $1`,
      [event],
    );
    expect(attempts.rows[0]).toEqual({ error: 'secret_unreadable', status: null });
    expect(sink.received).toEqual([]);
    const replaced = await a.request<{ eventsSecret: string }>('POST', '/v1/tenants/initech/events-secret', { body: {} });
    expect(replaced.status).toBe(201);
    issued.push(replaced.body.eventsSecret);
    await waitUntil('the delivery', () => sink.accepted().length > 0, 10_000, 50);
    expect(String(sink.accepted()[0].headers['webhook-id'])).toBe(event);
    expect(await ready()).toEqual([200, 200]);
    const all = [...a.logs, ...b.logs].join('');
    for (const leak of [...issued, ...damaged]) expect(all).not.toContain(leak);
  });
});
