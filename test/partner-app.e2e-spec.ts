import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser } from 'playwright-core';
import { startPartnerApp, type PartnerApp } from '../examples/partner-app/server.js';
import { launchChromium } from './support/chromium.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const SCREENSHOTS = 'test-output/partner-app';

/** The demo partner app (examples/partner-app) as a newcomer uses it: open it, click Connect, approve. */
describe('the demo partner app', () => {
  let t: TestApp;
  let demo: PartnerApp;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestApp({ env: { EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RELAY_INTERVAL_MS: '200' } });
    demo = await startPartnerApp({ serviceUrl: t.url, operatorKey: t.operatorKey, host: '127.0.0.1' });
    browser = await launchChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await demo?.close();
    await t?.close();
  });

  it('connects a sandbox user from its own origin, calls the upstream as them, and shows the verified connection.created', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 820 } });
    await page.goto(demo.url);
    await page.getByRole('button', { name: 'Connect' }).and(page.locator(':enabled')).waitFor();
    const [popup] = await Promise.all([page.waitForEvent('popup'), page.getByRole('button', { name: 'Connect' }).click()]);
    await popup.getByLabel(/Alice/).check();
    await popup.getByRole('button', { name: 'Approve' }).click();

    await page.getByRole('status').filter({ hasText: 'Connected:' }).waitFor({ timeout: 20_000 });
    const connectionId = /Connected: ([0-9a-f-]{36})/.exec((await page.getByRole('status').textContent()) ?? '')![1];
    await page.locator('#connection dd', { hasText: 'alice <' }).waitFor();
    await expectText(page.locator('#connection'), 'GET /me as them');
    await page.locator('#events li', { hasText: `connection.created  ${connectionId}` }).waitFor({ timeout: 20_000 });
    await page.screenshot({ path: `${SCREENSHOTS}/connected.png`, fullPage: true });

    const stored = await t.request<{ userId: string; upstreamUser: { id: string } }>(
      'GET',
      `/v1/tenants/${demo.tenantId}/connections/${connectionId}`,
    );
    expect(stored.body).toMatchObject({ userId: 'demo-user', upstreamUser: { id: 'alice' } });
    // The page shows what its backend chose to show: no key, secret or token reached it.
    const html = await page.content();
    expect(html).not.toMatch(/cwsk_|whsec_|cwsop_/);
  });

  it('refuses an event that cws-connect did not sign', async () => {
    const forged = await fetch(`${demo.url}/events`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'msg_1',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,AAAA',
      },
      body: JSON.stringify({ type: 'connection.deleted', timestamp: new Date().toISOString(), data: {} }),
    });
    expect(forged.status).toBe(400);
    const { events } = (await (await fetch(`${demo.url}/api/events`)).json()) as { events: Array<{ type: string }> };
    expect(events.map((e) => e.type)).not.toContain('connection.deleted');
  });
});

async function expectText(locator: { textContent(): Promise<string | null> }, text: string): Promise<void> {
  expect(await locator.textContent()).toContain(text);
}
