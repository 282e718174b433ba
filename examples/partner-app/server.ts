import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CwsConnectClient, EventVerificationError, verifyEvent, type VerifiedEvent } from '@cws-connect/node-client';
import { RecordsFeed, type CursorStore, type RecordsView } from './records-feed.js';

export interface PartnerAppOptions {
  /** cws-connect's address, as the browser reaches it. */
  serviceUrl: string;
  /** The operator key: the demo makes its own tenant and tenant key with it (a real partner is given a tenant key). */
  operatorKey: string;
  tenantId?: string;
  /** Port to listen on (0: any free one). */
  port?: number;
  /** Host name in the app's own address (the tenant's allowedReturnUrls and eventsTargetUrl). */
  host?: string;
  /** Where each user's change-feed cursor is kept (default: in memory); the feed resumes from it. */
  cursors?: CursorStore;
  /** How often the change feed is asked again once caught up (default 1000 ms). */
  feedPollIntervalMs?: number;
}

export interface PartnerApp {
  url: string;
  tenantId: string;
  close(): Promise<void>;
}

const PUBLIC = new URL('./public/', import.meta.url);
const FILES: Record<string, [string, string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
};
const MAX_EVENTS = 20;
const KEEP_ALIVE_MS = 15_000;

/**
 * A partner's web app in miniature: a page that connects its user with the browser module, and a backend that
 * uses @cws-connect/node-client to create connect sessions, call the upstream as that user, verify the events
 * cws-connect delivers to it, and follow the user's synced workflows (sent on to the page as server-sent events).
 */
export async function startPartnerApp(options: PartnerAppOptions): Promise<PartnerApp> {
  const tenantId = options.tenantId ?? 'demo-partner';
  const server = createServer();
  await new Promise<void>((r) => server.listen(options.port ?? 0, '127.0.0.1', r));
  const url = `http://${options.host ?? 'localhost'}:${(server.address() as AddressInfo).port}`;

  const { apiKey, eventsSecret } = await setUpTenant(options.serviceUrl, options.operatorKey, tenantId, url);
  const cws = new CwsConnectClient({ baseUrl: options.serviceUrl, apiKey, tenantId });
  const events: VerifiedEvent[] = [];
  const cursors = options.cursors ?? inMemoryCursors();
  const feeds = new Map<string, RecordsFeed>();
  const watchers = new Map<string, Set<ServerResponse>>();

  /** The user's feed, started on the first ask (with a listing now, so the copy fills without waiting an interval). */
  function feedOf(userId: string): RecordsFeed {
    let feed = feeds.get(userId);
    if (!feed) {
      feed = new RecordsFeed(cws, userId, cursors, (view) => broadcast(userId, view), options.feedPollIntervalMs ?? 1000);
      feeds.set(userId, feed);
      cws.syncNow(userId).catch(() => undefined);
    }
    return feed;
  }
  function broadcast(userId: string, view: RecordsView): void {
    for (const res of watchers.get(userId) ?? []) res.write(`data: ${JSON.stringify(view)}\n\n`);
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e: unknown) => send(res, 500, { error: e instanceof Error ? e.message : String(e) }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', url).pathname;
    const file = FILES[path];
    if (req.method === 'GET' && file) {
      res.writeHead(200, { 'content-type': file[1], 'cache-control': 'no-store' }).end(readFileSync(new URL(file[0], PUBLIC)));
      return;
    }
    if (req.method === 'GET' && path === '/config.json') return send(res, 200, { serviceUrl: options.serviceUrl, tenantId });

    // The partner backend: the page asks it for a connect link for the signed-in user.
    if (req.method === 'POST' && path === '/api/connect-sessions') {
      const { userId } = JSON.parse((await body(req)) || '{}') as { userId?: string };
      const session = await cws.createConnectSession({ kind: 'user', userId: userId || 'demo-user', returnUrl: `${url}/` });
      return send(res, 200, { connectUrl: session.connectUrl });
    }
    const connection = /^\/api\/connections\/([0-9a-f-]{36})$/.exec(path);
    if (req.method === 'GET' && connection) {
      const found = await cws.getConnection(connection[1]);
      // A typed call as that user: the upstream's /userinfo, with the user's own token.
      const me = found.userId ? await cws.me({ userId: found.userId }) : null;
      return send(res, 200, { connection: found, me: me?.data ?? null });
    }
    if (req.method === 'GET' && path === '/api/events') return send(res, 200, { events });

    // The user's synced workflows, live: the list now, then again at every change (server-sent events).
    if (req.method === 'GET' && path === '/api/records/stream') {
      const userId = new URL(req.url ?? '/', url).searchParams.get('userId') || 'demo-user';
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      const set = watchers.get(userId) ?? new Set<ServerResponse>();
      watchers.set(userId, set.add(res));
      res.write(`data: ${JSON.stringify(feedOf(userId).current())}\n\n`);
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
      req.on('close', () => {
        clearInterval(keepAlive);
        set.delete(res);
      });
      return;
    }

    // Where cws-connect delivers events: verified over the raw body before anything else.
    if (req.method === 'POST' && path === '/events') {
      try {
        events.unshift(verifyEvent(req.headers, await body(req), eventsSecret));
        events.length = Math.min(events.length, MAX_EVENTS);
        res.writeHead(204).end();
      } catch (e) {
        if (!(e instanceof EventVerificationError)) throw e;
        send(res, 400, { error: e.message });
      }
      return;
    }
    send(res, 404, { error: 'not found' });
  }

  return {
    url,
    tenantId,
    close: async () => {
      await Promise.all([...feeds.values()].map((f) => f.close()));
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
    },
  };
}

/**
 * The operator's part, done here so that the demo runs on its own: the tenant (allowing this app's address
 * and sending events to it), a fresh events secret, a tenant key. Idempotent: a second start reuses the tenant.
 */
async function setUpTenant(
  serviceUrl: string,
  operatorKey: string,
  tenantId: string,
  appUrl: string,
): Promise<{ apiKey: string; eventsSecret: string }> {
  const op = new CwsConnectClient({ baseUrl: serviceUrl, apiKey: operatorKey, tenantId }).api;
  const tenant = { params: { path: { tenantId } } };
  const settings = { allowedReturnUrls: [`${appUrl}/`], eventsTargetUrl: `${appUrl}/events` };
  const existing = await op.GET('/v1/tenants/{tenantId}', tenant);
  if (existing.response.status === 404) {
    const created = await op.POST('/v1/tenants', {
      body: { id: tenantId, name: 'Demo partner', environment: 'sandbox', design: 'admin+users', ...settings },
    });
    if (!created.data) throw new Error(`could not create the demo tenant: ${JSON.stringify(created.error)}`);
  } else if (existing.data) {
    const updated = await op.PATCH('/v1/tenants/{tenantId}', { ...tenant, body: settings });
    if (!updated.data) throw new Error(`could not update the demo tenant: ${JSON.stringify(updated.error)}`);
  } else {
    throw new Error(`cws-connect answered ${existing.response.status} for the demo tenant: is the operator key right?`);
  }
  // Synced records on for the demo's tenant: each connected user's workflows are kept by cws-connect (docs/records.md).
  const synced = await op.PATCH('/v1/tenants/{tenantId}', { ...tenant, body: { sync: { workflows: true } } });
  if (!synced.data) throw new Error(`could not turn synced records on for the demo tenant: ${JSON.stringify(synced.error)}`);
  const secret = await op.POST('/v1/tenants/{tenantId}/events-secret', tenant);
  const keys = await op.GET('/v1/tenants/{tenantId}/api-keys', tenant);
  for (const old of keys.data ?? [])
    if (old.name === 'partner-app demo')
      await op.DELETE('/v1/tenants/{tenantId}/api-keys/{keyId}', { params: { path: { tenantId, keyId: old.id } } });
  const key = await op.POST('/v1/tenants/{tenantId}/api-keys', { ...tenant, body: { name: 'partner-app demo' } });
  if (!secret.data || !key.data) throw new Error('could not create the demo tenant key or events secret');
  return { apiKey: key.data.key, eventsSecret: secret.data.eventsSecret };
}

function inMemoryCursors(): CursorStore {
  const held = new Map<string, string>();
  return { get: (userId) => held.get(userId), set: (userId, cursor) => void held.set(userId, cursor) };
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 1024 * 1024) req.destroy(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(value));
}
