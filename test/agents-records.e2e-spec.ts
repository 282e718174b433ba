import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectViaHttp, newTenant } from './support/connect.js';
import { mcpClient, mintSession, textOf } from './support/agents.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

interface SyncItem {
  userId: string;
  state: string;
  lastListedAt: string | null;
}
interface CopyRecord {
  id: string;
  data: { name?: string };
  version: number | null;
  syncedAt: string;
}
interface ListResult {
  asOf: string;
  workflows: CopyRecord[];
  next: string | null;
}

describe("agents' read tools over the synced copy (docs/agents.md, docs/records.md)", () => {
  let t: TestApp;
  let client: Client;
  const wf: Record<string, string> = {};

  async function launch(userId: string, name: string): Promise<string> {
    const res = await t.request<{ id: string }>('POST', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': userId }, body: { name } });
    expect(res.status).toBe(201);
    return res.body.id;
  }

  async function syncState(userId: string): Promise<SyncItem | undefined> {
    return (await t.request<{ items: SyncItem[] }>('GET', `/v1/tenants/acme/sync?userId=${userId}`)).body.items[0];
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { SYNC_POLL_INTERVAL: '1h' } });
    await newTenant(t, 'acme');
    for (const user of ['alice', 'bob'])
      expect((await connectViaHttp(t, 'acme', { userId: `u-${user}`, as: user })).status).toBe('connected');
    wf.a1 = await launch('u-alice', 'NDA Alpha');
    wf.a2 = await launch('u-alice', 'Lease Beta');
    wf.b1 = await launch('u-bob', 'MSA Gamma');
    const alice = await mintSession(t, 'acme', { userId: 'u-alice' });
    client = await mcpClient(alice.mcpUrl, alice.token);
  });
  afterAll(async () => {
    await client?.close();
    await t?.close();
  });

  it('lists the two tools in the read group, read-only, with schemas', async () => {
    const { tools } = await client.listTools();
    for (const name of ['recordsListWorkflows', 'recordsGetWorkflow']) {
      const tool = tools.find((x) => x.name === name);
      expect(tool?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, openWorldHint: false });
      expect(tool?.outputSchema?.required).toContain('asOf');
      expect(tool?.inputSchema.properties).not.toHaveProperty('userId');
    }
    const readOnly = await mintSession(t, 'acme', { userId: 'u-bob', tools: ['read'] });
    expect(readOnly.tools).toEqual(expect.arrayContaining(['recordsListWorkflows', 'recordsGetWorkflow']));
  });

  it('a tenant that does not sync, then a user with no complete listing yet: tool errors naming what to do instead', async () => {
    const off = await client.callTool({ name: 'recordsListWorkflows', arguments: {} });
    expect(off.isError).toBe(true);
    expect(textOf(off)).toMatch(/keeps no synced copy.*facadeListWorkflows.*\(conflict\)/);
    // Every listing fails: the copy is enrolled but never listed whole.
    t.sandbox!.setListing({ pageSize: 50, fail: { page: 1, status: 500, times: 1000 } });
    expect((await t.request('PATCH', '/v1/tenants/acme', { body: { sync: { workflows: true } } })).status).toBe(200);
    await waitUntil('the sync state', async () => (await syncState('u-alice')) !== undefined);
    const notYet = await client.callTool({ name: 'recordsGetWorkflow', arguments: { workflowId: wf.a1 } });
    expect(notYet.isError).toBe(true);
    expect(textOf(notYet)).toMatch(/not been copied yet.*facadeGetWorkflow/);
    expect((await syncState('u-alice'))?.lastListedAt).toBeNull();
    // The listings succeed again: both users' copies are made.
    t.sandbox!.setListing({ pageSize: null, fail: null });
    for (const user of ['u-alice', 'u-bob']) {
      expect((await t.request('POST', '/v1/tenants/acme/sync', { body: { userId: user } })).status).toBe(202);
      // A failed attempt may still hold the user's lease (its retries): the listing follows it.
      await waitUntil(`the listing of ${user}`, async () => (await syncState(user))?.lastListedAt != null, 45_000);
    }
  });

  it("answers the session user's copy as of its last listing, paged, without an upstream call", async () => {
    const asOf = (await syncState('u-alice'))?.lastListedAt;
    expect(asOf).toEqual(expect.any(String));
    t.sandbox!.clearRecords();
    const first = await client.callTool({ name: 'recordsListWorkflows', arguments: { limit: 1 } });
    expect(first.isError).toBeFalsy();
    const page1 = first.structuredContent as unknown as ListResult;
    expect(page1.asOf).toBe(asOf);
    expect(textOf(first)).toContain(`As of ${asOf}`);
    expect(page1.workflows).toHaveLength(1);
    expect(page1.next).toEqual(expect.any(String));
    const second = await client.callTool({ name: 'recordsListWorkflows', arguments: { after: page1.next } });
    const page2 = second.structuredContent as unknown as ListResult;
    expect(page2.next).toBeNull();
    const all = [...page1.workflows, ...page2.workflows];
    expect(new Set(all.map((r) => r.id))).toEqual(new Set([wf.a1, wf.a2]));
    expect(all.find((r) => r.id === wf.a1)?.data.name).toBe('NDA Alpha');

    const one = await client.callTool({ name: 'recordsGetWorkflow', arguments: { workflowId: wf.a2 } });
    expect(one.isError).toBeFalsy();
    expect(one.structuredContent).toMatchObject({ asOf, workflow: { id: wf.a2, data: { name: 'Lease Beta' } } });
    expect(textOf(one)).toContain(`As of ${asOf}`);
    // Read from the copy: nothing reached the upstream (no listing, no read, no token renewal).
    expect(t.sandbox!.records()).toEqual([]);
  });

  it("never reaches another user's copy", async () => {
    const bobs = await client.callTool({ name: 'recordsGetWorkflow', arguments: { workflowId: wf.b1 } });
    expect(bobs.isError).toBe(true);
    expect(textOf(bobs)).toMatch(/record_not_found/);
    expect(textOf(bobs)).not.toContain('MSA Gamma');
    const listed = await client.callTool({ name: 'recordsListWorkflows', arguments: { limit: 100 } });
    expect(JSON.stringify(listed)).not.toContain(wf.b1);
    // No argument names another user.
    const other = await client.callTool({ name: 'recordsListWorkflows', arguments: { userId: 'u-bob' } });
    expect(other.isError).toBe(true);
    expect(textOf(other)).toMatch(/input schema/);
    // Bob's own session sees his.
    const bob = await mintSession(t, 'acme', { userId: 'u-bob' });
    const bobClient = await mcpClient(bob.mcpUrl, bob.token);
    try {
      const his = await bobClient.callTool({ name: 'recordsGetWorkflow', arguments: { workflowId: wf.b1 } });
      expect(his.structuredContent).toMatchObject({ workflow: { id: wf.b1, data: { name: 'MSA Gamma' } } });
    } finally {
      await bobClient.close();
    }
  });
});
