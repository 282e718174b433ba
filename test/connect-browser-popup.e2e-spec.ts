import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium } from './support/chromium.js';
import { newTenant } from './support/connect.js';
import { startPartnerPage, type PartnerPage } from './support/partner-page.js';
import { startTestApp, type TestApp } from './support/test-app.js';

interface Shown {
  status?: string;
  connectionId?: string;
  error?: string;
  name?: string;
}

/**
 * The browser module (packages/connect-browser) on a partner page served from another origin than the
 * service, in Chromium: the popup flow, its failures, the redirect fallback, and the origin rule.
 */
describe('the browser module: connect in a popup', () => {
  let t: TestApp;
  let browser: Browser;
  let partner: PartnerPage;
  let stranger: PartnerPage;

  beforeAll(async () => {
    t = await startTestApp();
    partner = await startPartnerPage(t.url);
    stranger = await startPartnerPage(t.url);
    await newTenant(t, 'popup-co', { allowedReturnUrls: [partner.url] });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await partner?.close();
    await stranger?.close();
    await t?.close();
  });

  const connectUrl = async (body: Record<string, unknown>) => {
    const res = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/popup-co/connect-sessions', {
      body: { kind: 'user', returnUrl: partner.url, ...body },
    });
    expect(res.status).toBe(201);
    return res.body.connectUrl;
  };

  const openPartner = async (b: Browser, pageUrl: string, url: string, auto = false) => {
    const page = await b.newPage();
    await page.goto(`${pageUrl}?connectUrl=${encodeURIComponent(url)}${auto ? '&auto=1' : ''}`);
    return page;
  };

  /** Clicks Connect on the partner page; returns the popup once it shows the sandbox's consent page. */
  const startPopup = async (page: Page) => {
    await page.locator('#connect:not([disabled])').waitFor();
    const [popup] = await Promise.all([page.waitForEvent('popup'), page.click('#connect')]);
    await popup.getByRole('button', { name: 'Approve' }).waitFor();
    return popup;
  };

  const shown = async (page: Page): Promise<Shown> => {
    await page.locator('#result:not(:empty)').waitFor({ timeout: 20_000 });
    return JSON.parse((await page.locator('#result').textContent()) ?? '{}') as Shown;
  };

  /** Whether the popup closes: its close reaches the test over the DevTools protocol a moment after the opener saw the result. */
  const closes = async (popup: Page): Promise<boolean> => {
    if (!popup.isClosed()) await popup.waitForEvent('close', { timeout: 10_000 }).catch(() => undefined);
    return popup.isClosed();
  };

  const messagesFromService = (page: Page) =>
    page.evaluate(
      (origin) =>
        (globalThis as unknown as { messages: Array<{ origin: string; data: unknown }> }).messages.filter((m) => m.origin === origin),
      new URL(t.url).origin,
    );

  it('Approve resolves with the connection id, through one message that carries nothing else', async () => {
    const page = await openPartner(browser, partner.url, await connectUrl({ userId: 'popup-alice' }));
    const popup = await startPopup(page);
    await popup.getByLabel(/Alice/).check();
    await popup.getByRole('button', { name: 'Approve' }).click();
    const result = await shown(page);
    expect(result).toEqual({ status: 'connected', connectionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(await closes(popup)).toBe(true);

    const connection = await t.request<{ userId: string; upstreamUser: { id: string } }>(
      'GET',
      `/v1/tenants/popup-co/connections/${result.connectionId}`,
    );
    expect(connection.body).toMatchObject({ userId: 'popup-alice', upstreamUser: { id: 'alice' } });
    // The only message from the service's origin: type, status, connection id. No code, state or token.
    expect(await messagesFromService(page)).toEqual([
      { origin: new URL(t.url).origin, data: { type: 'cws-connect:result', status: 'connected', connectionId: result.connectionId } },
    ]);
    await page.close();
  });

  it('Deny rejects with access_denied', async () => {
    const page = await openPartner(browser, partner.url, await connectUrl({ userId: 'popup-bob' }));
    const popup = await startPopup(page);
    await popup.getByRole('button', { name: 'Deny' }).click();
    expect(await shown(page)).toEqual({ error: 'access_denied', name: 'CwsConnectError' });
    expect(await closes(popup)).toBe(true);
    await page.close();
  });

  it('an admin session approved by a non-admin rejects with not_admin, naming the stored connection', async () => {
    const page = await openPartner(browser, partner.url, await connectUrl({ kind: 'admin' }));
    const popup = await startPopup(page);
    await popup.getByLabel(/Carol/).check();
    await popup.getByRole('button', { name: 'Approve' }).click();
    const result = await shown(page);
    expect(result).toEqual({ error: 'not_admin', name: 'CwsConnectError', connectionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    await page.close();
  });

  it('closing the popup rejects with closed, and nothing is connected', async () => {
    const page = await openPartner(browser, partner.url, await connectUrl({ userId: 'popup-closer' }));
    const popup = await startPopup(page);
    await popup.close();
    expect(await shown(page)).toEqual({ error: 'closed', name: 'CwsConnectError' });
    const list = await t.request<Array<{ userId: string }>>('GET', '/v1/tenants/popup-co/connections');
    expect(JSON.stringify(list.body)).not.toContain('popup-closer');
    await page.close();
  });

  it('a connect link used once already rejects with expired', async () => {
    const url = await connectUrl({ userId: 'popup-twice' });
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(302);
    const page = await openPartner(browser, partner.url, url);
    await page.locator('#connect:not([disabled])').waitFor();
    await page.click('#connect');
    expect(await shown(page)).toEqual({ error: 'expired', name: 'CwsConnectError' });
    await page.close();
  });

  it('a page of an origin the tenant does not allow never receives the outcome', async () => {
    // A connect URL made for the allowed origin, opened by a page elsewhere (a leaked or copied link).
    const page = await openPartner(browser, stranger.url, await connectUrl({ userId: 'popup-stranger' }));
    const popup = await startPopup(page);
    await popup.getByLabel(/Dave/).check();
    await Promise.all([popup.waitForURL(/\/oauth\/complete\//), popup.getByRole('button', { name: 'Approve' }).click()]);
    // The completion page addressed its message to the allowed origin: the browser did not hand it over, the popup
    // closed itself, and the module could only report the closed window.
    expect(await shown(page)).toEqual({ error: 'closed', name: 'CwsConnectError' });
    expect(await messagesFromService(page)).toEqual([]);
    await page.close();
  });

  it('where popups are blocked, the page goes through the flow itself and reads the outcome back', async () => {
    // playwright-core turns Chromium's popup blocker off; this browser has it on, and auto=1 opens without a gesture.
    const strict = await launchChromium({ ignoreDefaultArgs: ['--disable-popup-blocking'] });
    try {
      const page = await strict.newPage();
      await page.goto(`${partner.url}?connectUrl=${encodeURIComponent(await connectUrl({ userId: 'popup-blocked' }))}&auto=1`);
      await page.getByRole('button', { name: 'Approve' }).waitFor();
      expect(new URL(page.url()).origin).toBe(new URL(t.sandbox!.url).origin);
      await page.getByLabel(/Bob/).check();
      await Promise.all([
        page.waitForURL((u) => u.origin === new URL(partner.url).origin),
        page.getByRole('button', { name: 'Approve' }).click(),
      ]);
      const result = await shown(page);
      expect(result).toEqual({ status: 'connected', connectionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      expect(new URL(page.url()).searchParams.get('status')).toBe('connected');
    } finally {
      await strict.close();
    }
  });
});

describe('the browser module and completion page over HTTP', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'popup-http', { allowedReturnUrls: ['http://127.0.0.1:5999/app'] });
  });
  afterAll(async () => t?.close());

  it('serves the module as JavaScript, importable from any origin, cached a day at its stable address and for ever at its hashed one', async () => {
    const res = await fetch(`${t.url}/sdk/connect-browser.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('cache-control')).toBe('public, max-age=86400');
    const body = await res.text();
    expect(body).toContain('export function open(');
    const etag = res.headers.get('etag')!;
    expect((await fetch(`${t.url}/sdk/connect-browser.js`, { headers: { 'if-none-match': etag } })).status).toBe(304);

    const pinned = /<(\/sdk\/connect-browser\.[0-9a-f]{12}\.js)>/.exec(res.headers.get('link') ?? '')![1];
    const again = await fetch(t.url + pinned);
    expect(again.status).toBe(200);
    expect(again.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await again.text()).toBe(body);
    const stale = await fetch(`${t.url}/sdk/connect-browser.000000000000.js`, { headers: { accept: 'application/json' } });
    expect(stale.status).toBe(404);
  });

  const popupSession = async () => {
    const res = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/popup-http/connect-sessions', {
      body: { kind: 'user', userId: 'u1', returnUrl: 'http://127.0.0.1:5999/app/back' },
    });
    const start = await fetch(`${res.body.connectUrl}?display=popup`, { redirect: 'manual' });
    expect(start.status).toBe(302);
    const row = await t.db.query<{ id: string; display: string }>(
      `SELECT id, display FROM connect_sessions WHERE user_id = 'u1' ORDER BY created_at DESC LIMIT 1`,
    );
    expect(row.rows[0].display).toBe('popup');
    return { id: row.rows[0].id, connectUrl: res.body.connectUrl };
  };

  it('the completion page posts to the returnUrl origin only, under a nonce, and falls back to the returnUrl without an opener', async () => {
    const { id } = await popupSession();
    const res = await fetch(`${t.url}/oauth/complete/${id}?status=error&error=access_denied`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    const nonce = /'nonce-([^']+)'/.exec(csp)![1];
    const html = await res.text();
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect(html).toContain('window.opener.postMessage(message, origin)');
    expect(html).toContain('var origin = "http://127.0.0.1:5999";');
    expect(html).toContain('{"type":"cws-connect:result","status":"error","error":"access_denied"}');
    expect(html).toContain('"http://127.0.0.1:5999/app/back?status=error&error=access_denied"');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('posts nothing once the tenant no longer allows the returnUrl', async () => {
    const { id } = await popupSession();
    expect((await t.request('PATCH', '/v1/tenants/popup-http', { body: { allowedReturnUrls: ['http://127.0.0.1:6000/'] } })).status).toBe(
      200,
    );
    try {
      const html = await (
        await fetch(`${t.url}/oauth/complete/${id}?status=connected&connectionId=6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10`)
      ).text();
      expect(html).not.toContain('<script');
      expect(html).not.toContain('127.0.0.1:5999');
      expect(html).toContain('no longer allowed');
    } finally {
      await t.request('PATCH', '/v1/tenants/popup-http', { body: { allowedReturnUrls: ['http://127.0.0.1:5999/app'] } });
    }
  });

  it.each([
    [
      'an unknown session',
      '6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10',
      'status=connected&connectionId=6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10',
      'connect_state_invalid',
    ],
    [
      'a session id that is no UUID',
      'not-a-session',
      'status=connected&connectionId=6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10',
      'connect_state_invalid',
    ],
    ['no status', null, 'connectionId=6f1c2d44-9a43-4f55-8a57-7a0d2b8e8f10', 'validation_failed'],
    ['a script in the error code', null, 'status=error&error=%3C%2Fscript%3E', 'validation_failed'],
    ['a connection id that is no UUID', null, 'status=connected&connectionId=%22%3E%3Cb%3E', 'validation_failed'],
    ['connected without a connection id', null, 'status=connected', 'validation_failed'],
    ['a repeated status', null, 'status=connected&status=error&error=x', 'validation_failed'],
  ])('refuses %s with a 400 page and no script', async (_name, sessionId, query, code) => {
    const id = sessionId ?? (await popupSession()).id;
    const res = await fetch(`${t.url}/oauth/complete/${id}?${query}`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain(`<code>${code}</code>`);
    expect(html).not.toContain('<script');
  });

  it('a reused link opened as a popup ends on the completion page with expired; as a page, it keeps its error page', async () => {
    const { id, connectUrl } = await popupSession();
    const again = await fetch(`${connectUrl}?display=popup`, { redirect: 'manual' });
    expect(again.status).toBe(302);
    expect(again.headers.get('location')).toBe(`/oauth/complete/${id}?status=error&error=expired`);
    const plain = await fetch(connectUrl, { redirect: 'manual', headers: { accept: 'application/json' } });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { error: { code: string } }).error.code).toBe('connect_session_expired');
  });
});
