import { hiddenFields } from 'cws-sandbox/testing';
import type { TestApp } from './test-app.js';

export interface ConnectOptions {
  kind?: 'user' | 'admin';
  /** The partner's user id (kind user). */
  userId?: string;
  /** Which seeded sandbox user approves on the consent page (admin, alice, bob, carol, dave). */
  as: string;
  decision?: 'approve' | 'deny';
  returnUrl?: string;
  scopes?: string[];
}

export interface ConnectOutcome {
  /** Where the browser ended: the tenant's returnUrl with the status. */
  location: URL;
  status: string | null;
  connectionId: string | null;
  error: string | null;
  /** The callback URL the sandbox sent the browser to (with code and state). */
  callbackUrl: URL;
  /** The Cookie header of the browser that opened the connect link (the state is bound to it). */
  cookie: string;
}

/** Where the consent page sent the browser back to, and the cookies that browser holds for it. */
export interface BrowserCallback {
  url: string;
  cookie: string;
}

/** Drives the whole connect flow over HTTP, the way a browser would, without rendering anything. */
export async function connectViaHttp(t: TestApp, tenantId: string, o: ConnectOptions): Promise<ConnectOutcome> {
  const kind = o.kind ?? 'user';
  const session = await t.request<{ connectUrl: string }>('POST', `/v1/tenants/${tenantId}/connect-sessions`, {
    body: {
      kind,
      ...(kind === 'user' ? { userId: o.userId ?? o.as } : {}),
      returnUrl: o.returnUrl ?? 'http://localhost:5173/done',
      ...(o.scopes ? { scopes: o.scopes } : {}),
    },
  });
  if (session.status !== 201) throw new Error(`connect session answered ${session.status}: ${session.text}`);
  const callback = await authorizeAtSandbox(session.body.connectUrl, o.as, o.decision ?? 'approve');
  const back = await openCallback(callback);
  const location = back.headers.get('location');
  if (back.status !== 302 || !location) throw new Error(`callback answered ${back.status}: ${await back.text()}`);
  const url = new URL(location);
  return {
    location: url,
    status: url.searchParams.get('status'),
    connectionId: url.searchParams.get('connectionId'),
    error: url.searchParams.get('error'),
    callbackUrl: new URL(callback.url),
    cookie: callback.cookie,
  };
}

/**
 * Opens the connect URL (keeping the cookies it sets, as the browser would), follows it to the sandbox's
 * consent page, decides; returns the callback URL and the browser's cookies.
 */
export async function authorizeAtSandbox(connectUrl: string, as: string, decision: 'approve' | 'deny'): Promise<BrowserCallback> {
  const start = await fetch(connectUrl, { redirect: 'manual' });
  const authorizeUrl = start.headers.get('location');
  if (start.status !== 302 || !authorizeUrl) throw new Error(`connect URL answered ${start.status}: ${await start.text()}`);
  const cookie = cookiesOf(start);
  const page = await fetch(authorizeUrl);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${html.slice(0, 300)}`);
  const form = new URLSearchParams(hiddenFields(html));
  form.set('decision', decision);
  form.set('user', as);
  const decided = await fetch(new URL('/oauth/authorize', authorizeUrl), {
    method: 'POST',
    body: form.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    redirect: 'manual',
  });
  const callback = decided.headers.get('location');
  if (decided.status !== 302 || !callback) throw new Error(`consent decision answered ${decided.status}: ${await decided.text()}`);
  return { url: callback, cookie };
}

/** The browser arriving at the callback: the callback URL with its cookies (or another browser's, or none). */
export function openCallback(
  callback: BrowserCallback,
  init: { cookie?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const cookie = init.cookie ?? callback.cookie;
  return fetch(callback.url, { redirect: 'manual', headers: { ...(cookie ? { cookie } : {}), ...init.headers } });
}

/** The Cookie header a browser would send back for the cookies this response sets (name=value pairs). */
export function cookiesOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

/** Creates tenant `id` (environment sandbox) on an instance reached by URL (a spawned process), with the operator key. */
export async function newTenantAt(url: string, operatorKey: string, id: string): Promise<void> {
  const res = await fetch(`${url}/v1/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
  });
  if (res.status !== 201) throw new Error(`tenant creation answered ${res.status}: ${await res.text()}`);
}

export async function newTenant(t: TestApp, id: string, over: Record<string, unknown> = {}): Promise<void> {
  const res = await t.request('POST', '/v1/tenants', {
    body: { id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'], ...over },
  });
  if (res.status !== 201) throw new Error(`tenant creation answered ${res.status}: ${res.text}`);
}
