import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser } from 'playwright-core';
// #region guide:imports
import type { IncomingHttpHeaders } from 'node:http';
import {
  CwsConnectClient,
  EventVerificationError,
  verifyEvent,
  type ConnectionEventData,
  type VerifiedEvent,
} from '@cws-connect/node-client';
// #endregion
import { launchChromium } from './support/chromium.js';
import { startTestApp, type TestApp } from './support/test-app.js';

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

  it('runs: a connected user, a typed call, a verified event', async () => {
    const CWS_URL = t.url;
    const OPERATOR_KEY = t.operatorKey;
    const connectionEvents: Array<{ type: string; data: ConnectionEventData }> = [];
    const handleConnectionEvent = (type: string, data: ConnectionEventData) => connectionEvents.push({ type, data });
    const handleUpstreamEvent = (_type: string, _data: unknown) => undefined;
    let connectLink: (userId: string) => Promise<string> = () => Promise.reject(new Error('not yet'));
    let onCwsEvent: (headers: IncomingHttpHeaders, rawBody: string) => number = () => 503;

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
      if (event.source === 'service')
        handleConnectionEvent(event.type, event.data); // typed: connectionId, userId, reason, …
      else handleUpstreamEvent(event.type, event.data); // the upstream's delivery, as received
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
  });
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
