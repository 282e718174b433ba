import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { mcpClient, mintSession, rawMcp, textOf, type MintedSession } from './support/agents.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { runAgent } from '../examples/agent/agent.js';

interface Workflow {
  id: string;
  step: string;
  creator: { id: string };
}
interface AuditItem {
  action: string;
  actor: { kind: string; id: string | null };
  target: string | null;
  userId: string | null;
  requestId: string | null;
  outcome: string;
  status: number | null;
  traceId: string | null;
}
type Operation = { operationId: string; tags?: string[]; requestBody?: { content: Record<string, unknown> } };

/** The operations the contract says become tools: every operation under /v1/tenants/{tenantId} that passes an upstream answer. */
async function contractTools(t: TestApp): Promise<{ tools: string[]; skipped: string[] }> {
  const doc = (
    await t.request<{ paths: Record<string, Record<string, Operation & { responses: Record<string, { headers?: object }> }>> }>(
      'GET',
      '/docs-json',
    )
  ).body;
  const tools: string[] = [];
  const skipped: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!path.startsWith('/v1/tenants/{tenantId}/')) continue;
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const passes = Object.entries(op.responses).some(([s, r]) => /^2\d\d$/.test(s) && r.headers && 'x-upstream-status' in r.headers);
      if (!passes) continue;
      const multipartOnly = op.requestBody !== undefined && !('application/json' in op.requestBody.content);
      if (path.includes('{path}') || multipartOnly) skipped.push(op.operationId);
      else tools.push(op.operationId);
    }
  }
  return { tools, skipped };
}

describe('agents over MCP (API.md section 10): sessions, the door, the tools made from the contract', () => {
  let t: TestApp;
  let alice: MintedSession;
  let client: Client;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
    for (const user of ['alice', 'bob']) await connectViaHttp(t, 'acme', { userId: `u-${user}`, as: user });
    await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    alice = await mintSession(t, 'acme', { userId: 'u-alice', tools: ['read', 'write', 'admin'], label: 'assistant' });
    client = await mcpClient(alice.mcpUrl, alice.token);
  });
  afterAll(async () => {
    await client?.close();
    await t.close();
  });

  it('mints a session once: its token is shown only in the answer and stored as a hash', async () => {
    expect(alice).toMatchObject({ userId: 'u-alice', mcpUrl: `${t.config.publicUrl}/mcp` });
    expect(alice.token).toMatch(/^cwsag_[A-Za-z0-9_-]{43}$/);
    const rows = await t.db.query<{ token_hash: Buffer; tools: string[] }>('SELECT token_hash, tools FROM agent_sessions WHERE id = $1', [
      alice.id,
    ]);
    expect(rows.rows[0].token_hash).toHaveLength(32);
    expect(JSON.stringify(rows.rows)).not.toContain(alice.token);
    const listed = await t.request<{ items: Array<Record<string, unknown>> }>('GET', '/v1/tenants/acme/agent-sessions?userId=u-alice');
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).toMatchObject({ id: alice.id, status: 'active', label: 'assistant', lastUsedAt: expect.any(String) });
    expect(listed.text).not.toContain(alice.token);
    // The default grant is read and write: no admin tool.
    const plain = await mintSession(t, 'acme', { userId: 'u-bob' });
    expect(plain.tools).not.toContain('listWebhooks');
    expect(plain.tools).toContain('facadeListWorkflows');
    expect(plain.tools).toContain('facadeLaunchWorkflow');
  });

  it('lists one tool per upstream operation of the OpenAPI document (and the composed one), with schemas', async () => {
    const { tools } = await client.listTools();
    const contract = await contractTools(t);
    expect(tools.map((x) => x.name).sort()).toEqual(
      [...contract.tools, 'launchWorkflowAndWait', 'recordsListWorkflows', 'recordsGetWorkflow'].sort(),
    );
    expect(contract.skipped).toEqual(['facadeUploadSigned']);
    expect(tools.map((x) => x.name).filter((n) => n.startsWith('facadeProxy'))).toEqual([]);
    for (const tool of tools) {
      expect(tool.description?.length).toBeGreaterThan(20);
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type).toBe('object');
      expect(JSON.stringify(tool)).not.toContain('#/components');
    }
    const get = tools.find((x) => x.name === 'facadeGetWorkflow');
    expect(get?.inputSchema.required).toEqual(['workflowId']);
    expect(get?.annotations?.readOnlyHint).toBe(true);
  });

  it("calls every tool: the sandbox sees the session user's token, the admin's for webhook tools; each call is one audit row", async () => {
    const { tools } = await client.listTools();
    t.sandbox!.clearRecords();
    const called: string[] = [];
    const call = async (name: string, args: Record<string, unknown>) => {
      called.push(name);
      return client.callTool({ name, arguments: args });
    };

    const me = await call('facadeMe', {});
    expect(me.isError).toBeFalsy();
    expect(me.structuredContent).toMatchObject({ status: 200 });

    const launched = await call('facadeLaunchWorkflow', { body: { name: 'NDA by agent', approvers: ['bob'] } });
    expect(launched.isError).toBeFalsy();
    const workflow = (launched.structuredContent as { status: number; body: Workflow }).body;
    expect(launched.structuredContent).toMatchObject({ status: 201 });
    expect(workflow.creator.id).toBe('alice');

    const listed = await call('facadeListWorkflows', { query: { step: 'Create' } });
    expect(JSON.stringify(listed.structuredContent)).toContain(workflow.id);

    const got = await call('facadeGetWorkflow', { workflowId: workflow.id });
    expect(got.structuredContent).toMatchObject({ status: 200, body: { id: workflow.id } });

    const later = await call('facadeLaunchWorkflowAsync', { body: { name: 'later' } });
    expect(later.structuredContent).toMatchObject({ status: 202 });

    // alice holds no approval on her own workflow: the upstream's refusal comes back as a tool error with its status.
    const approve = await call('facadeApproveWorkflow', { workflowId: workflow.id, body: {} });
    expect(approve.isError).toBe(true);
    expect(textOf(approve)).toMatch(/HTTP 403/);

    const hooks = await call('listWebhooks', {});
    expect(hooks.structuredContent).toMatchObject({ status: 200 });
    const hook = await call('createWebhook', { body: { events: ['workflow_step_updated'] } });
    expect(hook.structuredContent).toMatchObject({ status: 201 });
    expect(JSON.stringify(hook)).toContain('[REDACTED]');
    // The receiver's generated secret never reaches the agent, in the text or in the structured answer.
    expect(JSON.stringify(hook)).not.toMatch(/Bearer [A-Za-z0-9_-]{20,}/);

    // The composed tool: launches, then waits (with progress) until the workflow reaches Review.
    const progress: string[] = [];
    const waiting = client.callTool(
      {
        name: 'launchWorkflowAndWait',
        arguments: { body: { name: 'wait for review', approvers: ['bob'] }, untilStep: 'Review', timeoutSeconds: 30 },
      },
      undefined,
      { onprogress: (p) => void progress.push(p.message ?? '') },
    );
    called.push('launchWorkflowAndWait');
    let waitedId: string | undefined;
    for (let i = 0; i < 200 && waitedId === undefined; i++) {
      await new Promise((r) => setTimeout(r, 50));
      waitedId = t
        .sandbox!.records()
        .find((r) => r.method === 'GET' && /^\/workflows\/[^/]+$/.test(r.path) && r.path !== `/workflows/${workflow.id}`)
        ?.path.split('/')[2];
    }
    expect(waitedId).toBeDefined();
    t.sandbox!.setWorkflowStep(waitedId!, 'Review');
    const waited = await waiting;
    expect(waited.isError).toBeFalsy();
    expect(waited.structuredContent).toMatchObject({ status: 200, body: { id: waitedId, step: 'Review' } });
    expect(progress[0]).toMatch(/is in Create/);

    // The tools over the synced copy: this tenant does not sync (test/agents-records.e2e-spec.ts covers them).
    for (const [name, args] of [
      ['recordsListWorkflows', {}],
      ['recordsGetWorkflow', { workflowId: workflow.id }],
    ] as const) {
      const copy = await call(name, args);
      expect(copy.isError).toBe(true);
      expect(textOf(copy)).toMatch(/no synced copy/);
    }

    expect(new Set(called)).toEqual(new Set(tools.map((x) => x.name)));
    const upstream = t.sandbox!.records().filter((r) => r.path !== '/oauth/token');
    expect(upstream.length).toBeGreaterThan(0);
    for (const r of upstream) expect(r.tokenUserId).toBe(r.path === '/webhooks' ? 'admin' : 'alice');
    expect(upstream.filter((r) => r.path === '/webhooks')).toHaveLength(2);

    const audit = await t.request<{ items: AuditItem[] }>('GET', '/v1/tenants/acme/audit?limit=100');
    const rows = audit.body.items.filter((r) => r.action === 'agent.tool_call');
    expect(rows).toHaveLength(called.length);
    for (const row of rows) {
      expect(row).toMatchObject({ actor: { kind: 'agent_session', id: alice.id }, userId: 'u-alice', requestId: expect.any(String) });
      expect(row.target).toMatch(/^tools\//);
    }
    expect(rows.find((r) => r.target === 'tools/facadeApproveWorkflow')).toMatchObject({ outcome: 'failure', status: 403 });
    expect(rows.find((r) => r.target === 'tools/facadeLaunchWorkflow')).toMatchObject({ outcome: 'success', status: 201 });
    // Never the arguments nor the answers, never a token.
    expect(audit.text).not.toContain('NDA by agent');
    expect(audit.text).not.toContain(alice.token);
    expect(t.logs.join('')).not.toContain(alice.token);
  });

  it('answers bad arguments and unknown tools as tool errors, without an upstream call', async () => {
    t.sandbox!.clearRecords();
    const bad = await client.callTool({ name: 'facadeGetWorkflow', arguments: { workflowId: 42 } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/input schema.*workflowId/);
    const extra = await client.callTool({ name: 'facadeMe', arguments: { userId: 'u-bob' } });
    expect(extra.isError).toBe(true);
    const unknown = await client.callTool({ name: 'facadeProxy_get', arguments: {} });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/No tool named/);
    expect(t.sandbox!.records()).toHaveLength(0);
  });

  it('speaks protocol versions 2025-06-18 and 2025-11-25, statelessly (no session id), and publishes its resource metadata', async () => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const res = await rawMcp(alice.mcpUrl, alice.token, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('mcp-session-id')).toBeNull();
      const body = (await res.json()) as { result: { protocolVersion: string; capabilities: { tools?: object } } };
      expect(body.result.protocolVersion).toBe(version);
      expect(body.result.capabilities.tools).toBeDefined();
    }
    const meta = await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`);
    expect(meta.status).toBe(200);
    expect(await meta.json()).toMatchObject({ resource: alice.mcpUrl, bearer_methods_supported: ['header'] });
    const get = await fetch(alice.mcpUrl, { headers: { authorization: `Bearer ${alice.token}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
  });

  it("answers calls at once from many sessions under the same JSON-RPC ids, each with its own answer and the caller's id", async () => {
    const bob = await mintSession(t, 'acme', { userId: 'u-bob', tools: ['read'] });
    const me = (session: MintedSession, id: number | string) =>
      rawMcp(
        session.mcpUrl,
        session.token,
        { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'facadeMe', arguments: {} } },
        {
          'mcp-protocol-version': '2025-11-25',
        },
      );
    const calls = Array.from({ length: 24 }, (_, i) => ({ who: i % 2 === 0 ? 'alice' : 'bob', id: i % 3 === 0 ? 'same' : 1 }));
    const answers = await Promise.all(calls.map((c) => me(c.who === 'alice' ? alice : bob, c.id)));
    for (const [i, res] of answers.entries()) {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await res.json()) as { id: unknown; result: { isError?: boolean; structuredContent: Record<string, unknown> } };
      expect(body.id).toBe(calls[i].id);
      expect(body.result.isError).toBeFalsy();
      const other = calls[i].who === 'alice' ? 'bob' : 'alice';
      expect(JSON.stringify(body.result.structuredContent)).toContain(calls[i].who);
      expect(JSON.stringify(body.result.structuredContent)).not.toContain(other);
    }
    // What the one shared server does not take is answered by the SDK's own transport, as before.
    const batch = await rawMcp(alice.mcpUrl, alice.token, [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ]);
    expect(batch.status).toBe(200);
    expect(((await batch.json()) as Array<{ id: number }>).map((m) => m.id).sort()).toEqual([1, 2]);
    const notification = await rawMcp(alice.mcpUrl, alice.token, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(notification.status).toBe(202);
    const version = await rawMcp(
      alice.mcpUrl,
      alice.token,
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { 'mcp-protocol-version': '1999-01-01' },
    );
    expect(version.status).toBe(400);
    const accept = await rawMcp(alice.mcpUrl, alice.token, { jsonrpc: '2.0', id: 1, method: 'ping' }, { accept: 'application/json' });
    expect(accept.status).toBe(406);
    const invalid = await rawMcp(alice.mcpUrl, alice.token, { jsonrpc: '2.0', id: null, method: 'tools/list' });
    expect(invalid.status).toBe(400);
    const ping = await rawMcp(alice.mcpUrl, alice.token, { jsonrpc: '2.0', id: 'p', method: 'ping' });
    expect(await ping.json()).toEqual({ jsonrpc: '2.0', id: 'p', result: {} });
    expect((await t.request('DELETE', `/v1/tenants/acme/agent-sessions/${bob.id}`)).status).toBe(204);
  });

  it('stops a waiting tool call when its caller leaves (a plain JSON call, no progress asked)', async () => {
    t.sandbox!.clearRecords();
    const leaving = new AbortController();
    const call = fetch(alice.mcpUrl, {
      method: 'POST',
      signal: leaving.signal,
      headers: {
        authorization: `Bearer ${alice.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/call',
        params: {
          name: 'launchWorkflowAndWait',
          arguments: { body: { name: 'left behind', approvers: ['bob'] }, untilStep: 'Archive', timeoutSeconds: 60 },
        },
      }),
    }).catch((e: unknown) => e);
    const polls = () => t.sandbox!.records().filter((r) => r.method === 'GET' && /^\/workflows\/[^/]+$/.test(r.path)).length;
    for (let i = 0; i < 200 && polls() === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(polls()).toBeGreaterThan(0);
    leaving.abort();
    expect(await call).toMatchObject({ name: 'AbortError' });
    // The wait ends at once: its audit row says so (408), and the sandbox sees no poll after it.
    let row: AuditItem | undefined;
    for (let i = 0; i < 100 && row === undefined; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const audit = await t.request<{ items: AuditItem[] }>('GET', '/v1/tenants/acme/audit?limit=20');
      row = audit.body.items.find((r) => r.action === 'agent.tool_call' && r.target === 'tools/launchWorkflowAndWait' && r.status === 408);
    }
    expect(row).toMatchObject({ outcome: 'failure', userId: 'u-alice' });
    const after = polls();
    await new Promise((r) => setTimeout(r, 2500));
    expect(polls()).toBe(after);
  });

  it('the example agent (examples/agent) mints a read-only session and reads through it', async () => {
    const lines: string[] = [];
    const id = await runAgent({ serviceUrl: t.url, key: t.operatorKey, tenantId: 'acme', userId: 'u-alice', log: (l) => lines.push(l) });
    expect(lines.join('\n')).toMatch(/^tool facadeListWorkflows:/m);
    expect(lines.join('\n')).toMatch(/^facadeMe: \{/m);
    expect(lines.join('\n')).toMatch(/^facadeListWorkflows: \{/m);
    expect(lines.join('\n')).not.toMatch(/facadeLaunchWorkflow/);
    expect((await t.request('DELETE', `/v1/tenants/acme/agent-sessions/${id}`)).status).toBe(204);
  });
});

describe('failed agent session tokens count under the credential-failure limiter (docs/security.md)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ sandbox: false, env: { API_KEY_MAX_FAILURES_PER_CLIENT: '3' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 429 with Retry-After to a client past its bound of wrong tokens', async () => {
    const url = `${t.url}/mcp`;
    const body = { jsonrpc: '2.0', id: 1, method: 'ping' };
    for (let i = 0; i < 3; i++) expect((await rawMcp(url, `cwsag_wrong${i}`, body)).status).toBe(401);
    const refused = await rawMcp(url, 'cwsag_wrong', body);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_requests');
  });
});
