import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ChangeFeed, type ChangedTable } from '../src/changes/change-feed.service.js';
import { FacadeDoor } from '../src/facade/facade-door.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { openSocket } from './security/support.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}
interface Workflow {
  id: string;
  creator: { id: string };
  versionNumber: number;
  lastModified: string;
  Author: { type: string; id?: string };
  approvers: Array<{ userId: string; status: string }>;
  documents: Array<{ name: string; size: number; sha256: string }>;
}

/** Resolves when `app`'s change feed hears of that row (register before the change, await after). */
function changeHeard(t: TestApp, table: ChangedTable, id: string, timeoutMs = 3000): Promise<void> {
  const feed = t.app.get(ChangeFeed);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no change ${table}:${id} heard`)), timeoutMs);
    feed.subscribe((c) => {
      if (c.table === table && c.id === id) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

async function waitLive(t: TestApp): Promise<void> {
  const feed = t.app.get(ChangeFeed);
  for (let i = 0; i < 100 && !feed.live; i++) await new Promise((r) => setTimeout(r, 50));
  expect(feed.live).toBe(true);
}

/** A raw HTTP call, so that hop-by-hop headers and an untouched request target can be sent. */
function raw(
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    // path given separately: a URL string would be re-encoded by the client itself.
    const req = httpRequest({ hostname, port, path, method: 'GET', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the facade (API.md section 7)', () => {
  let t: TestApp;
  const as = (userId?: string): Record<string, string> => (userId ? { 'x-user-id': userId } : {});
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
    for (const user of ['alice', 'bob', 'carol', 'dave']) {
      const out = await connectViaHttp(t, 'acme', { userId: `u-${user}`, as: user });
      ids[user] = out.connectionId!;
    }
    ids.admin = (await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' })).connectionId!;
    await waitLive(t);
  });
  afterAll(async () => {
    await t.close();
  });

  it("alice's launch has creator alice upstream; bob approves with bob's token; carol's refused attempt passes through unchanged", async () => {
    t.sandbox!.clearRecords();
    const launched = await t.request<Workflow>('POST', '/v1/tenants/acme/workflows', {
      headers: as('u-alice'),
      body: { name: 'NDA', approvers: ['bob', 'carol'] },
    });
    expect(launched.status).toBe(201);
    expect(launched.headers.get('x-upstream-status')).toBe('201');
    expect(launched.body).toMatchObject({ creator: { id: 'alice' }, versionNumber: 1, Author: { type: 'user', id: 'alice' } });
    expect(typeof launched.body.lastModified).toBe('string');
    expect(
      t
        .sandbox!.records()
        .filter((r) => r.path === '/workflows')
        .map((r) => r.tokenUserId),
    ).toEqual(['alice']);
    const wf = launched.body.id;
    ids.wf = wf;

    const approved = await t.request<Workflow>('PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, {
      headers: as('u-bob'),
      body: { comment: 'ok' },
    });
    expect(approved.status).toBe(200);
    expect(approved.body.approvers.find((a) => a.userId === 'bob')?.status).toBe('approved');
    expect(t.sandbox!.records().at(-1)).toMatchObject({
      method: 'PATCH',
      path: `/workflows/${wf}/approvals`,
      tokenUserId: 'bob',
      status: 200,
    });

    // carol holds an approval; once used, another attempt is refused upstream (403), and the creator cannot approve at all.
    expect((await t.request('PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as('u-carol'), body: {} })).status).toBe(200);
    const refused = await t.request('PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as('u-carol'), body: {} });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('x-upstream-status')).toBe('403');
    expect(t.sandbox!.records().at(-1)).toMatchObject({ tokenUserId: 'carol', status: 403 });
    const direct = await fetch(`${t.sandbox!.url}/workflows/${wf}/approvals`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${t.sandbox!.issueTokens('carol').access_token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(direct.status).toBe(403);
    expect(refused.text).toBe(await direct.text());
    expect(refused.headers.get('content-type')).toBe(direct.headers.get('content-type'));
    expect((await t.request('PATCH', `/v1/tenants/acme/workflows/${wf}/approvals`, { headers: as('u-alice'), body: {} })).status).toBe(403);

    // A creator named in the body is refused upstream (spec 1 rule 4), passed through.
    const withCreator = await t.request<{ error: string }>('POST', '/v1/tenants/acme/workflows', {
      headers: as('u-alice'),
      body: { name: 'x', creator: 'bob' },
    });
    expect(withCreator.status).toBe(400);
    expect(withCreator.headers.get('x-upstream-status')).toBe('400');
  });

  it('each user sees what the upstream shows that user; GET one, async launch and /me use the same token', async () => {
    const list = async (user: string) =>
      (await t.request<{ workflows: Workflow[] }>('GET', '/v1/tenants/acme/workflows', { headers: as(user) })).body.workflows.map(
        (w) => w.id,
      );
    expect(await list('u-alice')).toContain(ids.wf);
    expect(await list('u-bob')).toContain(ids.wf);
    expect(await list('u-dave')).not.toContain(ids.wf);
    const hidden = await t.request('GET', `/v1/tenants/acme/workflows/${ids.wf}`, { headers: as('u-dave') });
    expect([hidden.status, hidden.headers.get('x-upstream-status')]).toEqual([404, '404']);
    const one = await t.request<Workflow>('GET', `/v1/tenants/acme/workflows/${ids.wf}`, { headers: as('u-bob') });
    expect(one.status).toBe(200);
    expect(one.body.versionNumber).toBeGreaterThan(1);

    const queued = await t.request<{ id: string; status: string }>('POST', '/v1/tenants/acme/workflows/async', {
      headers: as('u-dave'),
      body: { name: 'Async NDA' },
    });
    expect(queued.status).toBe(202);
    await new Promise((r) => setTimeout(r, 50));
    const created = await t.request<Workflow>('GET', `/v1/tenants/acme/workflows/${queued.body.id}`, { headers: as('u-dave') });
    expect(created.body.creator.id).toBe('dave');

    const me = await t.request<{ id: string; email: string }>('GET', '/v1/tenants/acme/me', { headers: as('u-bob') });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: 'bob', email: 'bob@acme.example' });
    expect(t.sandbox!.records().at(-1)).toMatchObject({ method: 'GET', path: '/userinfo', tokenUserId: 'bob' });
  });

  it('streams multipart launches and upload-signed; outside Sign the upstream refusal passes through', async () => {
    const form = new FormData();
    form.set('name', 'Multipart NDA');
    form.append('approvers', 'bob');
    const bytes = Buffer.from('%PDF-1.7 pretend contract '.repeat(1000));
    form.set('contract', new Blob([bytes], { type: 'application/pdf' }), 'contract.pdf');
    const res = await fetch(`${t.url}/v1/tenants/acme/workflows`, {
      method: 'POST',
      body: form,
      headers: { authorization: `Bearer ${t.operatorKey}`, 'x-user-id': 'u-alice' },
    });
    expect(res.status).toBe(201);
    const wf = (await res.json()) as Workflow;
    const { createHash } = await import('node:crypto');
    expect(wf.documents[0]).toMatchObject({ size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });

    const upload = () => {
      const signed = new FormData();
      signed.set('signed', new Blob([Buffer.from('signed!')], { type: 'application/pdf' }), 'signed.pdf');
      return fetch(`${t.url}/v1/tenants/acme/workflows/${wf.id}/upload-signed`, {
        method: 'POST',
        body: signed,
        headers: { authorization: `Bearer ${t.operatorKey}`, 'x-user-id': 'u-alice' },
      });
    };
    const early = await upload();
    expect(early.status).toBe(409);
    expect(early.headers.get('x-upstream-status')).toBe('409');
    expect(((await early.json()) as { error: string }).error).toBe('workflow_not_in_sign_step');
    t.sandbox!.setWorkflowStep(wf.id, 'Sign');
    const ok = await upload();
    expect(ok.status).toBe(200);
  });

  it('answers every routing error of section 7', async () => {
    const code = async (path: string, headers: Record<string, string>, tenant = 'acme') => {
      const res = await t.request<ErrorBody>('GET', `/v1/tenants/${tenant}${path}`, { headers });
      return [res.status, res.body.error?.code ?? null, res.headers.get('x-upstream-status')];
    };
    expect(await code('/workflows', {})).toEqual([400, 'user_id_required', null]);
    expect(await code('/workflows', as('u-nobody'))).toEqual([409, 'user_not_connected', null]);
    expect(await code('/me', as('u-nobody'))).toEqual([409, 'user_not_connected', null]);

    await newTenant(t, 'solo', { design: 'users' });
    await connectViaHttp(t, 'solo', { userId: 'u-alice', as: 'alice' });
    expect(await code('/proxy/webhooks', as('u-alice'), 'solo')).toEqual([409, 'admin_not_connected', null]);
    await newTenant(t, 'noadmin');
    await connectViaHttp(t, 'noadmin', { userId: 'u-alice', as: 'alice' });
    expect(await code('/proxy/webhooks', as('u-alice'), 'noadmin')).toEqual([409, 'admin_not_connected', null]);
    expect(await code('/workflows', {}, 'noadmin')).toEqual([400, 'user_id_required', null]);

    // reauth_required, set in the database behind a warm cache.
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-carol') })).status).toBe(200);
    const heard = changeHeard(t, 'connections', ids.carol);
    await t.db.query(`UPDATE connections SET status = 'reauth_required' WHERE id = $1`, [ids.carol]);
    await heard;
    expect(await code('/workflows', as('u-carol'))).toEqual([409, 'reauth_required', null]);
    await t.db.query(`UPDATE connections SET status = 'active' WHERE id = $1`, [ids.carol]);

    // Admin routes ignore X-User-Id and use the admin token; user routes never do.
    t.sandbox!.clearRecords();
    const hooks = await t.request('GET', '/v1/tenants/acme/proxy/webhooks', { headers: as('u-alice') });
    expect(hooks.status).toBe(200);
    expect(t.sandbox!.records().at(-1)).toMatchObject({ path: '/webhooks', tokenUserId: 'admin' });
    // A user token on an admin-only endpoint would be refused upstream: nothing routes it there.
    expect(t.sandbox!.records().every((r) => r.tokenUserId === 'admin')).toBe(true);

    // Design admin: a user route without X-User-Id uses the admin token.
    await newTenant(t, 'corp', { design: 'admin' });
    expect(await code('/workflows', {}, 'corp')).toEqual([409, 'admin_not_connected', null]);
    await connectViaHttp(t, 'corp', { kind: 'admin', as: 'admin' });
    const corp = await t.request('GET', '/v1/tenants/corp/workflows');
    expect(corp.status).toBe(200);
    expect(t.sandbox!.records().at(-1)).toMatchObject({ path: '/workflows', tokenUserId: 'admin' });
  });

  it('an upstream 401 causes one renewal and one successful retry', async () => {
    const before = t.sandbox!.stats();
    expect(t.sandbox!.expireAccessTokens({ userId: 'bob' })).toBeGreaterThan(0);
    t.sandbox!.clearRecords();
    const res = await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-bob') });
    expect(res.status).toBe(200);
    const after = t.sandbox!.stats();
    expect(after.refreshes - before.refreshes).toBe(1);
    expect(t.sandbox!.records().map((r) => `${r.path} ${r.status}`)).toEqual(['/workflows 401', '/oauth/token 200', '/workflows 200']);
    // The renewed token is used from then on, without another renewal.
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-bob') })).status).toBe(200);
    expect(t.sandbox!.stats().refreshes).toBe(after.refreshes);
  });

  it('an unreachable upstream is 502 upstream_unavailable', async () => {
    t.sandbox!.setFault({ mode: 'down', paths: ['/workflows'] });
    try {
      const res = await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') });
      expect([res.status, res.body.error.code]).toEqual([502, 'upstream_unavailable']);
      expect(res.headers.get('x-upstream-status')).toBeNull();
      // GETs were retried (UPSTREAM_RETRIES, default 2): three attempts in all.
      expect(t.sandbox!.records().filter((r) => r.outcome === 'fault_down').length).toBeGreaterThanOrEqual(3);
      t.sandbox!.clearRecords();
      const post = await t.request<ErrorBody>('POST', '/v1/tenants/acme/workflows', { headers: as('u-alice'), body: { name: 'never' } });
      expect([post.status, post.body.error.code]).toEqual([502, 'upstream_unavailable']);
      expect(t.sandbox!.records().filter((r) => r.outcome === 'fault_down')).toHaveLength(1);
    } finally {
      t.sandbox!.setFault(null);
    }
  });

  it('forwards end-to-end headers and the raw query only; hop-by-hop, cookie, authorization and x-user-id stay behind', async () => {
    t.sandbox!.clearRecords();
    const res = await raw(t.url, "/v1/tenants/acme/proxy/workflows?step=Create&x=%20a%2Fb&y=it's&z=%E2%9C%93", {
      authorization: `Bearer ${t.operatorKey}`,
      'x-user-id': 'u-alice',
      connection: 'keep-alive, x-hop-secret',
      'keep-alive': 'timeout=5',
      'x-hop-secret': '1',
      te: 'trailers',
      cookie: 'session=abc',
      'proxy-authorization': 'Basic eDp5',
      'x-end-to-end': 'yes',
      accept: 'application/json',
    });
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream-status']).toBe('200');
    expect(res.headers['set-cookie']).toBeUndefined();
    const record = t.sandbox!.records().at(-1)!;
    expect(record.query).toBe("step=Create&x=%20a%2Fb&y=it's&z=%E2%9C%93");
    expect(record.tokenUserId).toBe('alice');
    expect(record.headerNames).toEqual(expect.arrayContaining(['x-end-to-end', 'accept', 'authorization']));
    for (const name of ['x-hop-secret', 'keep-alive', 'te', 'cookie', 'proxy-authorization', 'x-user-id'])
      expect(record.headerNames).not.toContain(name);

    const dots = await raw(t.url, '/v1/tenants/acme/proxy/workflows/../oauth/token', {
      authorization: `Bearer ${t.operatorKey}`,
      'x-user-id': 'u-alice',
    });
    expect(dots.status).toBe(400);
  });

  it('deleting a connection makes the next call 409 user_not_connected even with a warm cache', async () => {
    for (let i = 0; i < 2; i++) expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') })).status).toBe(200);
    const heard = changeHeard(t, 'connections', ids.dave);
    expect((await t.request('DELETE', `/v1/tenants/acme/connections/${ids.dave}`)).status).toBe(204);
    await heard;
    const res = await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') });
    expect([res.status, res.body.error.code]).toEqual([409, 'user_not_connected']);

    // "Not connected" is never remembered: the first call after the connect is served, with no wait for the change.
    const again = await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') });
    expect(again.status).toBe(409);
    ids.dave = (await connectViaHttp(t, 'acme', { userId: 'u-dave', as: 'dave' })).connectionId!;
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') })).status).toBe(200);
  });

  it('while the change listener is down the cache is bypassed, and it is flushed when the listener is back', async () => {
    const feed = t.app.get(ChangeFeed);
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') })).status).toBe(200);
    feed.simulateDisconnect();
    expect(feed.live).toBe(false);
    await t.db.query('DELETE FROM connections WHERE id = $1', [ids.dave]);
    const res = await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') });
    expect([res.status, res.body.error.code]).toEqual([409, 'user_not_connected']);
    await waitLive(t);
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { headers: as('u-alice') })).status).toBe(200);
    expect((await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: as('u-dave') })).status).toBe(409);
  });

  it('caches tenant keys, and a revoked key stops working at once', async () => {
    const created = await t.request<{ id: string; key: string }>('POST', '/v1/tenants/acme/api-keys', { body: { name: 'facade' } });
    const key = created.body.key;
    for (let i = 0; i < 2; i++)
      expect((await t.request('GET', '/v1/tenants/acme/workflows', { key, headers: as('u-alice') })).status).toBe(200);
    expect((await t.request<ErrorBody>('GET', '/v1/tenants/solo/workflows', { key, headers: as('u-alice') })).body.error.code).toBe(
      'tenant_not_found',
    );
    const heard = changeHeard(t, 'tenant_api_keys', created.body.id);
    expect((await t.request('DELETE', `/v1/tenants/acme/api-keys/${created.body.id}`)).status).toBe(204);
    await heard;
    expect((await t.request('GET', '/v1/tenants/acme/workflows', { key, headers: as('u-alice') })).status).toBe(401);
  });

  it('documents the facade routes in the OpenAPI document', async () => {
    const doc = await t.request<{
      paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }>; responses: Record<string, unknown> }>>;
    }>('GET', '/docs-json', { key: null });
    const paths = doc.body.paths;
    for (const [path, method] of [
      ['/v1/tenants/{tenantId}/workflows', 'get'],
      ['/v1/tenants/{tenantId}/workflows', 'post'],
      ['/v1/tenants/{tenantId}/workflows/async', 'post'],
      ['/v1/tenants/{tenantId}/workflows/{workflowId}', 'get'],
      ['/v1/tenants/{tenantId}/workflows/{workflowId}/approvals', 'patch'],
      ['/v1/tenants/{tenantId}/workflows/{workflowId}/upload-signed', 'post'],
      ['/v1/tenants/{tenantId}/me', 'get'],
    ] as const) {
      const op = paths[path]?.[method];
      expect([path, method, Boolean(op)]).toEqual([path, method, true]);
      expect(op.parameters?.some((p) => p.name === 'X-User-Id' && p.in === 'header')).toBe(true);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['400', '409', '502', '504']));
    }
    expect(Object.keys(paths).some((p) => p.startsWith('/v1/tenants/{tenantId}/proxy/'))).toBe(true);
  });

  it('never shows a token in an answer or a log line', async () => {
    const issued = t.sandbox!.issueTokens('alice').access_token;
    expect(t.logs.join('')).not.toMatch(/Bearer [A-Za-z0-9_-]{20,}/);
    expect(t.logs.join('')).not.toContain(issued);
  });
});

describe('two instances on one database', () => {
  let a: TestApp;
  let b: TestApp;
  let carol: string;

  beforeAll(async () => {
    a = await startTestApp();
    b = await startSecondInstance(a, { UPSTREAM_TIMEOUT_MS: '400', UPSTREAM_RETRIES: '0' });
    await newTenant(a, 'acme');
    carol = (await connectViaHttp(a, 'acme', { userId: 'u-carol', as: 'carol' })).connectionId!;
    await waitLive(a);
    await waitLive(b);
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it('a connection deleted through another instance is gone on this one at once, warm cache or not', async () => {
    for (const t of [a, b, a])
      expect(
        (await t.request('GET', '/v1/tenants/acme/workflows', { key: t.operatorKey, headers: { 'x-user-id': 'u-carol' } })).status,
      ).toBe(200);
    const heard = changeHeard(a, 'connections', carol);
    expect((await b.request('DELETE', `/v1/tenants/acme/connections/${carol}`)).status).toBe(204);
    await heard;
    const res = await a.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-carol' } });
    expect([res.status, res.body.error.code]).toEqual([409, 'user_not_connected']);
  });

  it('a user connected through another instance is served on this one by the next call, however soon', async () => {
    for (const round of [1, 2, 3]) {
      const userId = `u-late-${round}`;
      for (const t of [a, b]) {
        const res = await t.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': userId } });
        expect([res.status, res.body.error.code]).toEqual([409, 'user_not_connected']);
      }
      await connectViaHttp(a, 'acme', { userId, as: 'dave' });
      // No wait for the change to be heard: nothing on `b` says this user has no connection.
      expect((await b.request('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': userId } })).status).toBe(200);
    }
  });

  it('a slow upstream is 504 upstream_timeout (UPSTREAM_TIMEOUT_MS)', async () => {
    await connectViaHttp(a, 'acme', { userId: 'u-bob', as: 'bob' });
    a.sandbox!.setFault({ mode: 'slow', delayMs: 1500, paths: ['/workflows'], count: 1 });
    const res = await b.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-bob' } });
    expect([res.status, res.body.error.code]).toEqual([504, 'upstream_timeout']);
    // Answered at UPSTREAM_TIMEOUT_MS, not when the upstream got round to it: the upstream call is still unanswered.
    expect(
      a
        .sandbox!.records()
        .filter((r) => r.path === '/workflows')
        .at(-1),
    ).toMatchObject({ status: 0 });
    a.sandbox!.setFault(null);
  });

  it('a closed port is 502 upstream_unavailable', async () => {
    const { createServer } = await import('node:net');
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const c = await startSecondInstance(a, { CWS_SANDBOX_API_URL: `http://127.0.0.1:${port}`, UPSTREAM_RETRIES: '0' });
    try {
      const res = await c.request<ErrorBody>('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-bob' } });
      expect([res.status, res.body.error.code]).toEqual([502, 'upstream_unavailable']);
    } finally {
      await c.close();
    }
  });
});

/** The headers of an answer read off a raw socket, by lower-case name. */
function rawHeaders(answer: string): Map<string, string> {
  const headers = new Map<string, string>();
  for (const line of answer.split('\r\n\r\n')[0].split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

/**
 * What every answer of the facade carries, success or error, whoever writes it (the facade, the stalled-body
 * watch, the HTTP parser's refusal): the request id (the caller's when it is a plain token), the same as the error
 * body's, and the security headers (docs/security.md, "Security headers").
 */
describe("the facade's answers all carry the request id and the security headers", () => {
  let t: TestApp;
  const alice = { 'x-user-id': 'u-alice' };

  beforeAll(async () => {
    t = await startTestApp({
      env: {
        HTTP_BODY_TIMEOUT_MS: '600',
        HTTP_HEADERS_TIMEOUT_MS: '800',
        FACADE_TENANT_MAX_IN_FLIGHT: '1',
        FACADE_TENANT_MAX_UPLOADS: '1',
        UPSTREAM_RETRIES: '0',
        LOG_LEVEL: 'warn',
      },
    });
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    await waitLive(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** [label, status, request id, the body's request id (errors), the security headers]: one line to compare. */
  const carried = (label: string, status: number, get: (name: string) => string | null | undefined, body: string) => {
    const requestId = get('x-request-id') ?? null;
    const error = status >= 400 ? ((JSON.parse(body) as ErrorBody).error?.requestId ?? null) : requestId;
    return [
      label,
      status,
      typeof requestId === 'string' && requestId.length > 0,
      error === requestId,
      get('x-content-type-options'),
      get('referrer-policy'),
      get('x-frame-options'),
      /^max-age=\d+/.test(get('strict-transport-security') ?? ''),
    ];
  };
  const expected = (label: string, status: number) => [label, status, true, true, 'nosniff', 'no-referrer', 'SAMEORIGIN', true];

  it("on a pass-through answer, with the caller's request id", async () => {
    const res = await t.request('GET', '/v1/tenants/acme/workflows', { headers: { ...alice, 'x-request-id': 'corr-42' } });
    expect(carried('200', res.status, (n) => res.headers.get(n), res.text)).toEqual(expected('200', 200));
    expect(res.headers.get('x-request-id')).toBe('corr-42');
    expect(res.headers.get('x-upstream-status')).toBe('200');
  });

  it('on every error answer of the facade', async () => {
    const cases: Array<[string, number, string, string, { key?: string | null; headers?: Record<string, string> }]> = [
      ['no credential', 401, 'GET', '/v1/tenants/acme/workflows', { key: null, headers: alice }],
      ['a wrong key', 401, 'GET', '/v1/tenants/acme/workflows', { key: `cwsk_${'x'.repeat(43)}`, headers: alice }],
      ['an unknown tenant', 404, 'GET', '/v1/tenants/nobody/workflows', { headers: alice }],
      ['a tenant id that is no slug', 404, 'GET', '/v1/tenants/a%2Fb/workflows', { headers: alice }],
      ['no user named', 400, 'GET', '/v1/tenants/acme/workflows', {}],
      ['a user not connected', 409, 'GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-nobody' } }],
      ['an encoded separator', 400, 'GET', '/v1/tenants/acme/proxy/workflows%2F..%2Foauth', { headers: alice }],
    ];
    for (const [label, status, method, path, init] of cases) {
      const res = await t.request(method, path, init);
      expect(carried(label, res.status, (n) => res.headers.get(n), res.text)).toEqual(expected(label, status));
    }
    const given = await t.request('GET', '/v1/tenants/acme/workflows', { headers: { 'x-request-id': 'corr-43' } });
    expect([given.status, given.headers.get('x-request-id')]).toEqual([400, 'corr-43']);

    t.sandbox!.setFault({ mode: 'down', paths: ['/workflows'] });
    try {
      const res = await t.request('GET', '/v1/tenants/acme/workflows', { headers: alice });
      expect(carried('upstream down', res.status, (n) => res.headers.get(n), res.text)).toEqual(expected('upstream down', 502));
    } finally {
      t.sandbox!.setFault(null);
    }

    // The tenant's bound (FACADE_TENANT_MAX_IN_FLIGHT 1 here): a call held by a slow upstream, and one more.
    t.sandbox!.setFault({ mode: 'slow', delayMs: 1500, paths: ['/workflows'], count: 1 });
    try {
      const held = t.request('GET', '/v1/tenants/acme/workflows', { headers: alice });
      const limits = t.app.get(FacadeDoor).limits;
      for (let i = 0; i < 200 && limits.holding('acme').calls === 0; i++) await new Promise((r) => setTimeout(r, 10));
      const res = await t.request('GET', '/v1/tenants/acme/workflows', { headers: alice });
      expect(carried('past the bound', res.status, (n) => res.headers.get(n), res.text)).toEqual(expected('past the bound', 429));
      expect(res.headers.get('retry-after')).toBe('1');
      expect((await held).status).toBe(200);
    } finally {
      t.sandbox!.setFault(null);
    }
  });

  it.each([
    [
      'a facade upload whose body stalls (HTTP_BODY_TIMEOUT_MS)',
      (key: string) =>
        `POST /v1/tenants/acme/workflows HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\nx-user-id: u-alice\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"name":`,
    ],
    [
      'headers that stop arriving on a facade route (HTTP_HEADERS_TIMEOUT_MS)',
      (key: string) => `GET /v1/tenants/acme/workflows HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\n`,
    ],
  ])('on the 408 of %s', async (label, request) => {
    const conn = await openSocket(t);
    conn.socket.write(request(t.operatorKey));
    await conn.closed;
    const answer = conn.received();
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
    const headers = rawHeaders(answer);
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    expect(carried(label, status, (n) => headers.get(n), body)).toEqual(expected(label, 408));
    expect(body).toContain('"code":"request_timeout"');
  });
});
