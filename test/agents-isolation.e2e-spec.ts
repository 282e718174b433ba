import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { ChangeFeed } from '../src/changes/change-feed.service.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { INITIALIZE, mcpClient, mintSession, rawMcp, ShiftedClock, textOf } from './support/agents.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';

interface Workflow {
  id: string;
}

async function waitLive(t: TestApp): Promise<void> {
  const feed = t.app.get(ChangeFeed);
  for (let i = 0; i < 100 && !feed.live; i++) await new Promise((r) => setTimeout(r, 50));
  expect(feed.live).toBe(true);
}

/** Resolves when `t`'s change feed hears of that agent session (register before the change, await after); the bound is `ms`. */
function revocationHeard(t: TestApp, id: string, ms: number): Promise<void> {
  const feed = t.app.get(ChangeFeed);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the second instance did not hear of ${id} within ${ms} ms`)), ms);
    feed.subscribe((c) => {
      if (c.table === 'agent_sessions' && c.id === id) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** Whether a token still opens /mcp (an initialize): 200, or 401 with the resource metadata's address. */
async function opens(url: string, token: string): Promise<boolean> {
  const res = await rawMcp(url, token, INITIALIZE);
  if (res.status === 401) {
    expect(res.headers.get('www-authenticate')).toMatch(
      /^Bearer resource_metadata="http:\/\/[^"]+\/\.well-known\/oauth-protected-resource\/mcp"/,
    );
    return false;
  }
  expect(res.status).toBe(200);
  return true;
}

describe('agent sessions are isolated: a user, a tenant, a grant, an expiry, a revocation (every instance)', () => {
  let t: TestApp;
  let second: TestApp;
  const clock = new ShiftedClock();
  let acmeKey: string;
  let carolsWorkflow: Workflow;

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      env: { AGENT_SESSIONS_PER_USER: '3', FACADE_TENANT_MAX_IN_FLIGHT: '1', FACADE_TENANT_MAX_UPLOADS: '1' },
    });
    await newTenant(t, 'acme');
    await newTenant(t, 'umbrella');
    for (const user of ['alice', 'bob', 'carol']) await connectViaHttp(t, 'acme', { userId: `u-${user}`, as: user });
    await connectViaHttp(t, 'umbrella', { userId: 'u-alice', as: 'alice' });
    acmeKey = (await t.request<{ key: string }>('POST', '/v1/tenants/acme/api-keys', { body: {} })).body.key;
    carolsWorkflow = (
      await t.request<Workflow>('POST', '/v1/tenants/acme/workflows', {
        headers: { 'x-user-id': 'u-carol' },
        body: { name: 'private', approvers: ['dave'] },
      })
    ).body;
    second = await startSecondInstance(t);
    await waitLive(t);
    await waitLive(second);
  });
  afterAll(async () => {
    await second?.close();
    await t?.close();
  });

  it("a session of alice never reaches bob's connection, another tenant, or a tool outside its grant", async () => {
    const alice = await mintSession(t, 'acme', { userId: 'u-alice', tools: ['facadeGetWorkflow', 'facadeMe'] }, acmeKey);
    expect(alice.tools).toEqual(['facadeGetWorkflow', 'facadeMe']);
    const client = await mcpClient(alice.mcpUrl, alice.token);
    try {
      expect((await client.listTools()).tools.map((x) => x.name)).toEqual(['facadeGetWorkflow', 'facadeMe']);
      t.sandbox!.clearRecords();
      // carol's workflow is not alice's to see: the upstream says so to alice's token.
      const other = await client.callTool({ name: 'facadeGetWorkflow', arguments: { workflowId: carolsWorkflow.id } });
      expect(other.isError).toBe(true);
      expect(textOf(other)).toMatch(/HTTP 404/);
      // Outside the grant: refused before anything is sent, as if the tool did not exist.
      const launch = await client.callTool({ name: 'facadeLaunchWorkflow', arguments: { body: { name: 'x' } } });
      expect(launch.isError).toBe(true);
      expect(textOf(launch)).toMatch(/No tool named "facadeLaunchWorkflow"/);
      const admin = await client.callTool({ name: 'listWebhooks', arguments: {} });
      expect(admin.isError).toBe(true);
      // No argument names another user or tenant: the session's own are the only ones.
      const spoof = await client.callTool({ name: 'facadeMe', arguments: { tenantId: 'umbrella', userId: 'u-bob' } });
      expect(spoof.isError).toBe(true);
      await client.callTool({ name: 'facadeMe', arguments: {} });
      const records = t.sandbox!.records().filter((r) => r.path !== '/oauth/token');
      expect(records.map((r) => r.tokenUserId)).toEqual(['alice', 'alice']);
    } finally {
      await client.close();
    }

    // acme's key cannot mint, list or revoke for another tenant (404, as if it did not exist).
    expect((await t.request('POST', '/v1/tenants/umbrella/agent-sessions', { key: acmeKey, body: { userId: 'u-alice' } })).status).toBe(
      404,
    );
    const theirs = await mintSession(t, 'umbrella', { userId: 'u-alice' });
    expect((await t.request('GET', '/v1/tenants/umbrella/agent-sessions', { key: acmeKey })).status).toBe(404);
    expect((await t.request('DELETE', `/v1/tenants/acme/agent-sessions/${theirs.id}`, { key: acmeKey })).status).toBe(404);
    expect(await opens(theirs.mcpUrl, theirs.token)).toBe(true);
    // A grant cannot be widened: unknown names are refused, and a token of another kind opens nothing.
    expect(
      (await t.request('POST', '/v1/tenants/acme/agent-sessions', { body: { userId: 'u-alice', tools: ['everything'] } })).status,
    ).toBe(400);
    expect(await opens(alice.mcpUrl, acmeKey)).toBe(false);
    expect((await t.request('GET', '/v1/tenants/acme/agent-sessions', { key: alice.token })).status).toBe(401);
  });

  it('a user without a connection gets a tool error with a connect link, or a URL elicitation when the client declares it', async () => {
    const nobody = await mintSession(t, 'acme', { userId: 'u-nobody' });
    const plain = await mcpClient(nobody.mcpUrl, nobody.token);
    const result = await plain.callTool({ name: 'facadeMe', arguments: {} });
    await plain.close();
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/user_not_connected.*open http:\/\/[^ ]+\/connect\/[^ ]+/);

    const eliciting = await mcpClient(nobody.mcpUrl, nobody.token, { elicitation: { url: {} } });
    const refused = await eliciting.callTool({ name: 'facadeMe', arguments: {} }).catch((e: unknown) => e);
    await eliciting.close();
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).code).toBe(-32042);
    const elicitations = ((refused as McpError).data as { elicitations: Array<{ mode: string; url: string }> }).elicitations;
    expect(elicitations[0]).toMatchObject({ mode: 'url', url: expect.stringMatching(/\/connect\//) });
  });

  it("holds the tenant's bound of calls in flight (shared with the facade), and passes the upstream's 429 on with its meaning", async () => {
    const s = await mintSession(t, 'acme', { userId: 'u-alice', tools: ['read'] });
    const client = await mcpClient(s.mcpUrl, s.token);
    try {
      t.sandbox!.setFault({ mode: 'slow', delayMs: 1500, paths: ['/workflows'], count: 1 });
      const slow = client.callTool({ name: 'facadeListWorkflows', arguments: {} });
      let busy: Awaited<typeof slow> | undefined;
      for (let i = 0; i < 40 && !(busy && busy.isError); i++) {
        await new Promise((r) => setTimeout(r, 50));
        busy = await client.callTool({ name: 'facadeMe', arguments: {} });
      }
      expect(busy?.isError).toBe(true);
      expect(textOf(busy)).toMatch(/too_many_requests.*retry after 1 second/);
      expect((await slow).isError).toBeFalsy();

      t.sandbox!.setFault({ mode: 'status', status: 429, retryAfterSeconds: 7, paths: ['/workflows'], count: 1 });
      const limited = await client.callTool({ name: 'facadeListWorkflows', arguments: {} });
      expect(limited.isError).toBe(true);
      expect(textOf(limited)).toMatch(/HTTP 429.*slow down/);
    } finally {
      t.sandbox!.setFault(null);
      await client.close();
    }
  });

  it('a revocation is refused by a second instance on the same database within a second', async () => {
    const s = await mintSession(t, 'acme', { userId: 'u-bob' });
    const onSecond = s.mcpUrl.replace(t.url, second.url).replace(t.config.publicUrl, second.url);
    expect(await opens(onSecond, s.token)).toBe(true);
    const heard = revocationHeard(second, s.id, 1000);
    expect((await t.request('DELETE', `/v1/tenants/acme/agent-sessions/${s.id}`, { key: acmeKey })).status).toBe(204);
    expect(await opens(s.mcpUrl, s.token)).toBe(false);
    await heard;
    expect(await opens(onSecond, s.token)).toBe(false);
    const listed = await t.request<{ items: Array<{ id: string; status: string }> }>('GET', '/v1/tenants/acme/agent-sessions?userId=u-bob');
    expect(listed.body.items.find((i) => i.id === s.id)?.status).toBe('revoked');
  });

  it('ends with its expiry', async () => {
    const s = await mintSession(t, 'acme', { userId: 'u-alice', expiresInSeconds: 60 });
    expect(await opens(s.mcpUrl, s.token)).toBe(true);
    clock.offsetMs = 61_000;
    try {
      expect(await opens(s.mcpUrl, s.token)).toBe(false);
    } finally {
      clock.offsetMs = 0;
    }
  });

  it("is revoked when its user's connection is deleted, its user erased, or its tenant deleted", async () => {
    const connections = await t.request<{ connections: Array<{ id: string }> }>('GET', '/v1/tenants/acme/connections?userId=u-bob');
    const bobs = await mintSession(t, 'acme', { userId: 'u-bob' });
    const heard = revocationHeard(second, bobs.id, 1000);
    expect((await t.request('DELETE', `/v1/tenants/acme/connections/${connections.body.connections[0].id}`)).status).toBe(204);
    await heard;
    expect(await opens(bobs.mcpUrl.replace(t.config.publicUrl, second.url), bobs.token)).toBe(false);
    expect(await opens(bobs.mcpUrl, bobs.token)).toBe(false);

    const carols = await mintSession(t, 'acme', { userId: 'u-carol' });
    expect(await opens(carols.mcpUrl, carols.token)).toBe(true);
    expect((await t.request('DELETE', '/v1/tenants/acme/users/u-carol')).status).toBe(204);
    expect(await opens(carols.mcpUrl, carols.token)).toBe(false);
    expect((await t.db.query('SELECT 1 FROM agent_sessions WHERE tenant_id = $1 AND user_id = $2', ['acme', 'u-carol'])).rowCount).toBe(0);

    const theirs = await mintSession(t, 'umbrella', { userId: 'u-alice' });
    expect(await opens(theirs.mcpUrl.replace(t.config.publicUrl, second.url), theirs.token)).toBe(true);
    expect((await t.request('DELETE', '/v1/tenants/umbrella')).status).toBe(204);
    expect(await opens(theirs.mcpUrl, theirs.token)).toBe(false);
    for (let i = 0; i < 20 && (await opens(theirs.mcpUrl.replace(t.config.publicUrl, second.url), theirs.token)); i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(await opens(theirs.mcpUrl.replace(t.config.publicUrl, second.url), theirs.token)).toBe(false);
  });

  it('bounds the live sessions of a user (AGENT_SESSIONS_PER_USER) and pages the list', async () => {
    const minted = [];
    for (let i = 0; i < 3; i++) minted.push(await mintSession(t, 'acme', { userId: 'u-dora', label: `n${i}` }));
    const over = await t.request<{ error: { code: string } }>('POST', '/v1/tenants/acme/agent-sessions', { body: { userId: 'u-dora' } });
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe('agent_session_limit');
    expect((await t.request('DELETE', `/v1/tenants/acme/agent-sessions/${minted[0].id}`)).status).toBe(204);
    minted.push(await mintSession(t, 'acme', { userId: 'u-dora' }));

    const first = await t.request<{ items: Array<{ id: string }>; next: string | null }>(
      'GET',
      '/v1/tenants/acme/agent-sessions?userId=u-dora&limit=2',
    );
    expect(first.body.items.map((i) => i.id)).toEqual([minted[0].id, minted[1].id]);
    const rest = await t.request<{ items: Array<{ id: string }>; next: string | null }>(
      'GET',
      `/v1/tenants/acme/agent-sessions?userId=u-dora&limit=2&after=${first.body.next}`,
    );
    expect(rest.body.items.map((i) => i.id)).toEqual([minted[2].id, minted[3].id]);
    expect(rest.body.next).toBeNull();
    // A cursor of another listing is refused.
    expect((await t.request('GET', `/v1/tenants/acme/agent-sessions?limit=2&after=${first.body.next}`)).status).toBe(400);
    expect((await t.request('POST', '/v1/tenants/acme/agent-sessions', { body: { userId: 'u-dora', expiresInSeconds: 5 } })).status).toBe(
      400,
    );
  });
});
