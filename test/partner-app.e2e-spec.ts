import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type Page } from 'playwright-core';
import { startPartnerApp, type PartnerApp } from '../examples/partner-app/server.js';
import { encodeChangeCursor } from '../src/records/change-cursor.js';
import { launchChromium } from './support/chromium.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const SCREENSHOTS = 'test-output/partner-app';

/** The demo partner app (examples/partner-app) as a newcomer uses it: open it, click Connect, approve. */
describe('the demo partner app', () => {
  let t: TestApp;
  let demo: PartnerApp;
  let browser: Browser;
  let page: Page;
  // The demo keeps each user's feed cursor here; demo-user's is one older than SYNC_TOMBSTONE_DAYS (410 cursor_expired).
  const expired = encodeChangeCursor({ writerXid: '1', seq: 1, at: Date.now() - 31 * 86_400_000 });
  const stored = new Map<string, string>([['demo-user', expired]]);

  beforeAll(async () => {
    t = await startTestApp({ env: { EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RELAY_INTERVAL_MS: '200' } });
    demo = await startPartnerApp({
      serviceUrl: t.url,
      operatorKey: t.operatorKey,
      host: '127.0.0.1',
      feedPollIntervalMs: 300,
      cursors: { get: (userId) => stored.get(userId), set: (userId, cursor) => void stored.set(userId, cursor) },
    });
    browser = await launchChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await demo?.close();
    await t?.close();
  });

  it('connects a sandbox user from its own origin, calls the upstream as them, and shows the verified connection.created', async () => {
    page = await browser.newPage({ viewport: { width: 1100, height: 820 } });
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

  it("shows the user's synced workflows and a change made upstream, live, without a reload", async () => {
    const launched = await t.request<{ id: string }>('POST', `/v1/tenants/${demo.tenantId}/workflows`, {
      headers: { 'x-user-id': 'demo-user' },
      body: { name: 'Supply agreement with Hooli', approvers: ['bob'] },
    });
    expect(launched.status).toBe(201);
    const workflowId = launched.body.id;
    expect((await t.request('POST', `/v1/tenants/${demo.tenantId}/sync`, { body: { userId: 'demo-user' } })).status).toBe(202);

    const row = page.locator(`#records tr[data-id="${workflowId}"]`);
    await row.waitFor({ timeout: 20_000 });
    await expectText(row, 'Supply agreement with Hooli');
    const before = await t.request<{ lastModified: string; data: { step: string } }>(
      'GET',
      `/v1/tenants/${demo.tenantId}/records/workflows/${workflowId}?userId=demo-user`,
    );
    expect(before.status).toBe(200);
    expect(before.body.data.step).not.toBe('Review');
    await expectText(row.locator('.step'), before.body.data.step);
    // The stored cursor had expired: the demo read the copy again (the reset of changes()) and follows on.
    const feed = page.locator('#records-feed');
    await expectText(feed, 'Following the change feed');
    await expectText(feed, 'resumed from the stored cursor');
    await expectText(feed, 'copy read again 1× (cursor expired)');
    expect(stored.get('demo-user')).not.toBe(expired);

    // The workflow moves on upstream; the next listing finds it and the row changes in place.
    await page.evaluate('window.sameDocument = true');
    t.sandbox!.setWorkflowStep(workflowId, 'Review');
    expect((await t.request('POST', `/v1/tenants/${demo.tenantId}/sync`, { body: { userId: 'demo-user' } })).status).toBe(202);
    await row.locator('.step', { hasText: 'Review' }).waitFor({ timeout: 20_000 });
    const after = await t.request<{ lastModified: string }>(
      'GET',
      `/v1/tenants/${demo.tenantId}/records/workflows/${workflowId}?userId=demo-user`,
    );
    expect(after.body.lastModified).not.toBe(before.body.lastModified);
    await expectText(row, after.body.lastModified.slice(0, 19).replace('T', ' '));
    expect(await row.getAttribute('class')).toBe('changed');
    expect(await page.evaluate('window.sameDocument')).toBe(true);
    await page.screenshot({ path: `${SCREENSHOTS}/records.png`, fullPage: true });
    expect(await page.content()).not.toMatch(/cwsk_|whsec_|cwsop_/);
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
