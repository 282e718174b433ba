import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser } from 'playwright-core';
import { launchChromium } from './support/chromium.js';
import { newTenant } from './support/connect.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** What a person does: open the connect URL in a real browser, pick a user, click Approve (or Deny). */
// playwright-core starts Chromium with a fresh, empty profile of its own.
describe('the connect flow in headless Chromium', () => {
  let t: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'browser-co', { allowedReturnUrls: [`${t.url}/`] });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  const connectUrl = async (userId: string) => {
    // The returnUrl is on the app itself (any page will do: the browser only has to arrive there).
    const res = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/browser-co/connect-sessions', {
      body: { kind: 'user', userId, returnUrl: `${t.url}/health/live` },
    });
    expect(res.status).toBe(201);
    return res.body.connectUrl;
  };

  it('Approve reaches the returnUrl with status=connected', async () => {
    const page = await browser.newPage();
    await page.goto(await connectUrl('browser-alice'));
    await page.getByLabel(/Alice/).check();
    await Promise.all([page.waitForURL(/\/health\/live\?/), page.getByRole('button', { name: 'Approve' }).click()]);
    const url = new URL(page.url());
    expect(url.searchParams.get('status')).toBe('connected');
    const connections = await t.request<{ connections: Array<{ id: string; userId: string; upstreamUser: { id: string } }> }>(
      'GET',
      '/v1/tenants/browser-co/connections',
    );
    expect(connections.body.connections.find((c) => c.id === url.searchParams.get('connectionId'))).toMatchObject({
      userId: 'browser-alice',
      upstreamUser: { id: 'alice' },
    });
    await page.close();
  });

  it('Deny reaches the returnUrl with status=error&error=access_denied', async () => {
    const page = await browser.newPage();
    await page.goto(await connectUrl('browser-bob'));
    await Promise.all([page.waitForURL(/\/health\/live\?/), page.getByRole('button', { name: 'Deny' }).click()]);
    const url = new URL(page.url());
    expect(url.searchParams.get('status')).toBe('error');
    expect(url.searchParams.get('error')).toBe('access_denied');
    await page.close();
  });
});
