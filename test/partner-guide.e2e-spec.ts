import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser } from 'playwright-core';
import { encodeChangeCursor } from '../src/records/change-cursor.js';
// #region guide:imports
import type { IncomingHttpHeaders } from 'node:http';
import {
  CwsConnectClient,
  EventVerificationError,
  verifyEvent,
  type ConnectionEventData,
  type ServiceEvent,
  type VerifiedEvent,
} from '@cws-connect/node-client';
// #endregion
// #region guide:agent-imports
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
// #endregion
import { textOf } from './support/agents.js';
import { launchChromium } from './support/chromium.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil } from './support/webhook-sink.js';

const GUIDE = new URL('../docs/partner-guide.md', import.meta.url);
const THIS_FILE = new URL(import.meta.url);
const BROWSER_SNIPPET = new URL('./partner-guide/browser.js', import.meta.url);

/**
 * docs/partner-guide.md, run: each of its code blocks is a region of this file (or the whole browser snippet
 * file), checked identical below, and the story runs end to end against a started service, a partner server on
 * another origin and Chromium.
 */
describe('the partner guide', () => {
  let t: TestApp;
  let browser: Browser;
  let partner: Server;

  beforeAll(async () => {
    t = await startTestApp({ env: { EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RELAY_INTERVAL_MS: '200' } });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    partner?.closeAllConnections();
    await new Promise<void>((r) => (partner ? partner.close(() => r()) : r()));
    await t?.close();
  });

  it('shows exactly the code that runs here', () => {
    const blocks = guideBlocks(readFileSync(GUIDE, 'utf8'));
    const regions = { ...sourceRegions(readFileSync(THIS_FILE, 'utf8')), browser: readFileSync(BROWSER_SNIPPET, 'utf8').trimEnd() };
    expect(Object.keys(blocks).sort()).toEqual(Object.keys(regions).sort());
    for (const [name, code] of Object.entries(blocks))
      expect({ name, code }).toEqual({ name, code: regions[name as keyof typeof regions] });
  });

  it('runs: a connected user, a typed call, a verified event, an agent session, synced records, an endpoint', async () => {
    const CWS_URL = t.url;
    const OPERATOR_KEY = t.operatorKey;
    const connectionEvents: Array<{ type: string; data: ConnectionEventData }> = [];
    const handleConnectionEvent = (type: string, data: ConnectionEventData) => connectionEvents.push({ type, data });
    const handleUpstreamEvent = (_type: string, _data: unknown) => undefined;
    const serviceEvents: ServiceEvent[] = [];
    const handleServiceEvent = (event: ServiceEvent) => serviceEvents.push(event);
    let connectLink: (userId: string) => Promise<string> = () => Promise.reject(new Error('not yet'));
    let onCwsEvent: (headers: IncomingHttpHeaders, rawBody: string) => number = () => 503;
    const recordChanges: Array<{ type: string; data: unknown }> = [];
    const handleRecordChange = (type: string, data: unknown) => recordChanges.push({ type, data });
    const recordDeliveries: Array<{ headers: IncomingHttpHeaders; rawBody: string }> = [];
    let onRecordEvent: (headers: IncomingHttpHeaders, rawBody: string) => number = () => 503;

    // The partner's server, on its own origin: its page, its connect route, its events endpoint.
    const page = `<!doctype html><meta charset="utf-8"><button id="connect">Connect</button><p id="status"></p>
<script type="module">${readFileSync(BROWSER_SNIPPET, 'utf8').replace('http://localhost:3000', CWS_URL)}</script>`;
    partner = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method === 'GET' && req.url === '/') return void res.writeHead(200, { 'content-type': 'text/html' }).end(page);
        if (req.method === 'POST' && req.url === '/connect') {
          return void connectLink('u-alice').then((connectUrl) =>
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ connectUrl })),
          );
        }
        if (req.method === 'POST' && req.url === '/cws-events')
          return void res.writeHead(onCwsEvent(req.headers, Buffer.concat(chunks).toString('utf8'))).end();
        if (req.method === 'POST' && req.url === '/cws-records') {
          recordDeliveries.push({ headers: req.headers, rawBody: Buffer.concat(chunks).toString('utf8') });
          return void res.writeHead(onRecordEvent(req.headers, Buffer.concat(chunks).toString('utf8'))).end();
        }
        res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => partner.listen(0, '127.0.0.1', r));
    const PARTNER_URL = `http://127.0.0.1:${(partner.address() as AddressInfo).port}`;

    // #region guide:operator
    const operator = new CwsConnectClient({ baseUrl: CWS_URL, apiKey: OPERATOR_KEY, tenantId: 'acme' });
    const tenant = await operator.api.POST('/v1/tenants', {
      body: {
        id: 'acme',
        name: 'Acme Legal',
        environment: 'sandbox',
        design: 'admin+users',
        allowedReturnUrls: [`${PARTNER_URL}/`],
        eventsTargetUrl: `${PARTNER_URL}/cws-events`,
      },
    });
    const eventsSecret = tenant.data!.eventsSecret; // shown once: keep it with your other secrets
    const key = await operator.api.POST('/v1/tenants/{tenantId}/api-keys', {
      params: { path: { tenantId: 'acme' } },
      body: { name: 'backend' },
    });
    const TENANT_KEY = key.data!.key; // shown once too
    // #endregion

    // #region guide:client
    const cws = new CwsConnectClient({ baseUrl: CWS_URL, apiKey: TENANT_KEY, tenantId: 'acme' });

    // Behind your own login, e.g. POST /connect: a single-use link (10 minutes) for the signed-in user.
    connectLink = async (userId: string) => {
      const { connectUrl } = await cws.createConnectSession({ kind: 'user', userId, returnUrl: `${PARTNER_URL}/` });
      return connectUrl;
    };
    // #endregion

    // #region guide:events
    onCwsEvent = (headers: IncomingHttpHeaders, rawBody: string): number => {
      let event: VerifiedEvent;
      try {
        event = verifyEvent(headers, rawBody, eventsSecret); // rawBody: the bytes as received, before any JSON parsing
      } catch (e) {
        if (e instanceof EventVerificationError) return 400; // not signed by cws-connect, altered, or too old
        throw e;
      }
      // upstream: its delivery as received; service: connection.*, record.changed, sync.*, endpoint.* (data typed)
      if (event.source === 'upstream') handleUpstreamEvent(event.type, event.data);
      else if ('connectionId' in event.data) handleConnectionEvent(event.type, event.data);
      else handleServiceEvent(event);
      return 204; // event.id is stable across retries: use it to ignore a repeat
    };
    // #endregion

    const tab = await browser.newPage();
    await tab.goto(`${PARTNER_URL}/`);
    const [popup] = await Promise.all([tab.waitForEvent('popup'), tab.click('#connect')]);
    await popup.getByLabel(/Alice/).check();
    await popup.getByRole('button', { name: 'Approve' }).click();
    await tab.locator('#status', { hasText: 'Connected (' }).waitFor({ timeout: 20_000 });
    const connectionId = /Connected \(([0-9a-f-]{36})\)/.exec((await tab.locator('#status').textContent()) ?? '')![1];

    // #region guide:typed-call
    const me = await cws.me({ userId: 'u-alice' }); // GET /userinfo with Alice's own token
    const launched = await cws.workflows.launch({ name: 'NDA with Globex', approvers: ['bob'] }, { userId: 'u-alice' });
    const connected: string[] = [];
    for await (const connection of cws.listConnections({ kind: 'user', status: 'active' })) connected.push(connection.userId!);
    // #endregion

    expect(me.data).toMatchObject({ id: 'alice' });
    expect(launched).toMatchObject({ status: 201, data: { creator: { id: 'alice' } } });
    expect(connected).toEqual(['u-alice']);

    for (let i = 0; i < 200 && !connectionEvents.some((e) => e.data.connectionId === connectionId); i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(connectionEvents).toContainEqual({
      type: 'connection.created',
      data: expect.objectContaining({ connectionId, userId: 'u-alice', upstreamUserId: 'alice' }),
    });
    await tab.close();

    // #region guide:agent-session
    // Your backend mints a session for the signed-in user; the token is in this answer only.
    const session = await cws.createAgentSession({ userId: 'u-alice', tools: ['read'], expiresInSeconds: 3600, label: 'assistant' });

    // The agent: any MCP client that sends the token as a bearer header, here the official TypeScript SDK.
    const agent = new Client({ name: 'assistant', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(session.mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${session.token}` } },
    });
    await agent.connect(transport);
    const { tools } = await agent.listTools(); // the read tools only: facadeMe, facadeListWorkflows, …
    const asAlice = await agent.callTool({ name: 'facadeMe', arguments: {} }); // as Alice, with her permissions only
    await agent.close();

    // When the agent is done: every instance refuses the token from now on.
    await cws.revokeAgentSession(session.id);
    // #endregion

    expect(session).toMatchObject({ mcpUrl: `${CWS_URL}/mcp`, userId: 'u-alice', tools: expect.arrayContaining(['facadeMe']) });
    expect(tools.map((tool) => tool.name)).toContain('facadeListWorkflows');
    expect(tools.map((tool) => tool.name)).not.toContain('facadeLaunchWorkflow');
    expect(JSON.parse(textOf(asAlice))).toMatchObject({ id: 'alice' });
    const revoked = await fetch(session.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${session.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(revoked.status).toBe(401);

    /** Waits until a listing of the user completed after `before` (the sync state's lastListedAt). */
    const listedAfter = (before: string | null) =>
      waitUntil('a listing of u-alice', async () => {
        const { data } = await cws.api.GET('/v1/tenants/{tenantId}/sync', {
          params: { path: { tenantId: 'acme' }, query: { userId: 'u-alice' } },
        });
        const at = data?.items[0]?.lastListedAt ?? null;
        return at !== null && at !== before ? at : null;
      });

    // #region guide:sync-on
    // The operator turns sync on for the tenant (SYNC_WORKFLOWS=on does it for every tenant).
    await operator.api.PATCH('/v1/tenants/{tenantId}', { params: { path: { tenantId: 'acme' } }, body: { sync: { workflows: true } } });

    // Each user is listed again every SYNC_POLL_INTERVAL with their own token; ask for a listing now (202):
    await cws.api.POST('/v1/tenants/{tenantId}/sync', { params: { path: { tenantId: 'acme' } }, body: { userId: 'u-alice' } });
    // #endregion

    const lastListed = await listedAfter(null);

    // #region guide:records
    // Your copy of a user's workflows, by id, and where you are in the change feed.
    const held = new Map<string, unknown>();
    let cursor = '';

    const readAll = async (userId: string) => {
      held.clear();
      let after: string | undefined;
      let first: string | undefined;
      do {
        const { data } = await cws.api.GET('/v1/tenants/{tenantId}/records/workflows', {
          params: { path: { tenantId: 'acme' }, query: { userId, after, limit: 1000 } },
        });
        for (const record of data!.items) held.set(record.id, record.data);
        first ??= data!.cursor; // the moment of this read: the changes after it are in the feed
        after = data!.next ?? undefined;
      } while (after);
      cursor = first!;
    };

    const catchUp = async (userId: string) => {
      for (;;) {
        const { data, response } = await cws.api.GET('/v1/tenants/{tenantId}/records/workflows/changes', {
          params: { path: { tenantId: 'acme' }, query: { cursor, userId, limit: 1000 } },
        });
        if (response.status === 410) return readAll(userId); // cursor_expired: read the copy again, follow on from there
        for (const change of data!.items) {
          if (change.action === 'deleted') held.delete(change.id);
          else held.set(change.id, change.data);
        }
        cursor = data!.next; // store it: the next catch-up starts here
        if (data!.items.length === 0) return; // caught up
      }
    };

    await readAll('u-alice');
    // #endregion

    const launchedId = (launched.data as { id: string }).id;
    expect(held.get(launchedId)).toMatchObject({ name: 'NDA with Globex' });
    const second = await cws.workflows.launch({ name: 'MSA with Initech', approvers: ['bob'] }, { userId: 'u-alice' });
    const secondId = (second.data as { id: string }).id;
    await cws.api.POST('/v1/tenants/{tenantId}/sync', { params: { path: { tenantId: 'acme' } }, body: { userId: 'u-alice' } });
    await listedAfter(lastListed);
    expect(held.has(secondId)).toBe(false);
    await catchUp('u-alice');
    expect(held.get(secondId)).toMatchObject({ name: 'MSA with Initech' });
    const caughtUp = new Map(held);
    await catchUp('u-alice'); // nothing new: an empty page
    expect(held).toEqual(caughtUp);
    // A cursor older than SYNC_TOMBSTONE_DAYS: 410 cursor_expired, and catchUp reads the whole copy again.
    const expired = encodeChangeCursor({ writerXid: '1', seq: 1, at: Date.now() - 31 * 86_400_000 });
    const heldIds = [...held.keys()].sort();
    cursor = expired;
    held.clear();
    await catchUp('u-alice');
    expect([...held.keys()].sort()).toEqual(heldIds);
    expect(heldIds).toEqual(expect.arrayContaining([launchedId, secondId]));
    expect(cursor).not.toBe(expired);

    // #region guide:endpoint
    // Alice's record changes only, to another address of yours, signed with that endpoint's own secret.
    const endpoint = await cws.createEndpoint({
      url: `${PARTNER_URL}/cws-records`,
      description: 'record changes of u-alice',
      eventTypes: ['record.*'],
      filter: { 'data.userId': 'u-alice', 'data.action': { $in: ['added', 'updated', 'deleted'] } },
    });
    let endpointSecret = endpoint.secret; // shown only here: keep it with your other secrets

    onRecordEvent = (headers: IncomingHttpHeaders, rawBody: string): number => {
      let event: VerifiedEvent;
      try {
        event = verifyEvent(headers, rawBody, endpointSecret); // event.id: msg_…, the same on every retry
      } catch (e) {
        if (e instanceof EventVerificationError) return 400;
        throw e;
      }
      handleRecordChange(event.type, event.data); // record.changed: {object, id, userId, action, version, cursor}
      return 204;
    };

    // Would the endpoint take this event? (its event types and filter, applied to the event as delivered)
    const takesBob = await cws.testEndpointFilter(endpoint.id, {
      type: 'record.changed',
      timestamp: new Date().toISOString(),
      data: { object: 'workflow', id: 'wf-1', userId: 'u-bob', action: 'added', version: 1 },
    }); // false: the filter takes u-alice's changes only

    // A new secret; for overlapSeconds every delivery carries both signatures, so switch over at your pace.
    endpointSecret = await cws.rotateEndpointSecret(endpoint.id, { overlapSeconds: 3600 });
    // #endregion

    expect(endpoint).toMatchObject({ eventTypes: ['record.*'], secret: expect.stringMatching(/^whsec_/) });
    expect(takesBob).toBe(false);
    expect(
      await cws.testEndpointFilter(endpoint.id, {
        type: 'record.changed',
        timestamp: new Date().toISOString(),
        data: { object: 'workflow', id: 'wf-1', userId: 'u-alice', action: 'added', version: 1 },
      }),
    ).toBe(true);
    expect(endpointSecret).not.toBe(endpoint.secret);
    expect((await cws.listEndpoints()).map((e) => e.id)).toContain(endpoint.id);
    const third = await cws.workflows.launch({ name: 'SOW with Hooli', approvers: ['bob'] }, { userId: 'u-alice' });
    const thirdId = (third.data as { id: string }).id;
    await cws.api.POST('/v1/tenants/{tenantId}/sync', { params: { path: { tenantId: 'acme' } }, body: { userId: 'u-alice' } });
    await waitUntil('the record.changed delivery', () => recordChanges.length > 0, 30_000);
    expect(recordChanges[0]).toMatchObject({
      type: 'record.changed',
      data: { object: 'workflow', id: thirdId, userId: 'u-alice', action: 'added' },
    });
    // During the overlap the delivery verifies with the old secret too; never with another.
    const [delivery] = recordDeliveries;
    expect(verifyEvent(delivery.headers, delivery.rawBody, endpoint.secret).id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(() => verifyEvent(delivery.headers, delivery.rawBody, eventsSecret)).toThrow(EventVerificationError);
  }, 180_000);
});

/** The guide's code blocks, by the name in the `<!-- snippet: name -->` line above each. */
function guideBlocks(markdown: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of markdown.matchAll(/<!-- snippet: ([a-z-]+) -->\n\n?```[a-z]*\n([\s\S]*?)\n```/g)) out[m[1]] = m[2];
  return out;
}

/** The `// #region guide:name` … `// #endregion` blocks of a source file, dedented. */
function sourceRegions(source: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of source.matchAll(/^[ \t]*\/\/ #region guide:([a-z-]+)\n([\s\S]*?)\n[ \t]*\/\/ #endregion/gm)) {
    const lines = m[2].split('\n');
    const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
    out[m[1]] = lines.map((l) => l.slice(indent)).join('\n');
  }
  return out;
}
