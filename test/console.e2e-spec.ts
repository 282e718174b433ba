import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { EventsRepository } from '../src/events/events.repository.js';
import { launchChromium } from './support/chromium.js';
import { connectViaHttp } from './support/connect.js';
import { startSecondInstance, startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CONSOLE = join(ROOT, 'packages', 'console');
/** Screenshots of each page, for a person to look at (gitignored). */
const SHOTS = join(ROOT, 'test-output', 'console');
const TENANT = 'console-co';

interface EventItem {
  id: string;
  type: string;
  payload: Record<string, unknown>;
  delivery: { state: string; attempts: number; lastError: string | null };
}
interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

/** Builds the console when its output is missing or older than its sources (`npm run build:console`). */
function ensureConsoleBuilt(): void {
  const built = join(CONSOLE, 'dist', 'index.html');
  const newest = (dir: string): number =>
    Math.max(
      ...readdirSync(dir, { withFileTypes: true }).map((e) =>
        e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs,
      ),
    );
  const sources = Math.max(
    newest(join(CONSOLE, 'src')),
    statSync(join(CONSOLE, 'index.html')).mtimeMs,
    statSync(join(CONSOLE, 'vite.config.ts')).mtimeMs,
  );
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return;
  execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** Every credential a body must never carry, with a name for the failure message. */
function secretsOf(t: TestApp, extra: Record<string, string>): Record<string, string> {
  const secrets: Record<string, string> = {
    ...extra,
    'operator key': t.operatorKey,
    'sandbox client secret': t.config.environments.sandbox!.clientSecret,
  };
  for (const [i, v] of t.sandbox!.issuedTokenValues().entries()) secrets[`upstream token #${i}`] = v;
  for (const k of t.config.vaultKeys) secrets[`vault key ${k.kid}`] = k.key.toString('base64');
  return secrets;
}

describe('the operator console, as a person uses it (headless Chromium)', () => {
  let t: TestApp;
  let sink: WebhookSink;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let eventsSecret = '';
  let tenantKey = '';
  const endpointSecrets: Record<string, string> = {};
  const bodies: Array<Promise<{ url: string; text: string }>> = [];
  const requested: string[] = [];
  let sinkUp = false;

  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    ensureConsoleBuilt();
    mkdirSync(SHOTS, { recursive: true });
    sink = await WebhookSink.start();
    sink.respond = () => (sinkUp ? 200 : 500);
    // One failed attempt makes an event dead, so the console has one to redeliver at once.
    t = await startTestApp({
      env: {
        EVENTS_RETRY_BASE_MS: '50',
        EVENTS_RETRY_MAX_MS: '100',
        EVENTS_RETRY_SPAN_MS: '0',
        EVENTS_POLL_INTERVAL_MS: '500',
        EVENTS_RELAY_INTERVAL_MS: '50',
      },
    });
    const tenant = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants', {
      body: {
        id: TENANT,
        name: 'Console Co',
        environment: 'sandbox',
        allowedReturnUrls: ['http://localhost:5173/'],
        eventsTargetUrl: sink.url,
      },
    });
    expect(tenant.status).toBe(201);
    eventsSecret = tenant.body.eventsSecret;
    const key = await t.request<{ key: string }>('POST', `/v1/tenants/${TENANT}/api-keys`, { body: { name: 'partner' } });
    expect(key.status).toBe(201);
    tenantKey = key.body.key;

    for (const as of ['alice', 'bob']) expect((await connectViaHttp(t, TENANT, { userId: `console-${as}`, as })).status).toBe('connected');
    // Alice's grant is revoked upstream (the sandbox's control); the next renewal learns it for real.
    expect(t.sandbox!.revokeUser('alice')).toBeGreaterThan(0);
    const alice = (
      await t.request<{ connections: Array<{ id: string; userId: string }> }>(
        'GET',
        `/v1/tenants/${TENANT}/connections?userId=console-alice`,
      )
    ).body.connections[0];
    const renewal = await t.request<ErrorBody>('POST', `/v1/tenants/${TENANT}/connections/${alice.id}/refresh`);
    expect(renewal.status).toBe(409);
    expect(renewal.body.error.code).toBe('reauth_required');
    // The partner's endpoint answered 500 to every event so far: all of them are dead.
    await waitUntil('dead events', async () => {
      const events = (await t.request<{ events: EventItem[] }>('GET', `/v1/tenants/${TENANT}/events`)).body.events;
      return events.length >= 3 && events.every((e) => e.delivery.state === 'dead');
    });

    browser = await launchChromium();
    // A laptop screen.
    context = await browser.newContext({ viewport: { width: 1366, height: 768 }, timezoneId: 'UTC' });
    context.on('request', (r) => requested.push(r.url()));
    context.on('response', (r) =>
      bodies.push(
        r.text().then(
          (text) => ({ url: r.url(), text }),
          () => ({ url: r.url(), text: '' }),
        ),
      ),
    );
    page = await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await sink?.close();
  });

  it('signs in with the operator key (keyboard only) and lands on the tenants with the figures', async () => {
    await page.goto(`${t.url}/console`);
    expect(new URL(page.url()).pathname).toBe('/console/');
    await page.getByLabel('Operator key').fill('not-the-operator-key-but-long-enough-00');
    await page.keyboard.press('Enter');
    await expect(page.getByRole('alert').textContent()).resolves.toContain('not the operator key');
    await page.getByLabel('Operator key').fill(tenantKey);
    await page.keyboard.press('Enter');
    await expect(page.getByRole('alert').textContent()).resolves.toContain('not the operator key');
    await shot('sign-in');

    await page.getByLabel('Operator key').fill(t.operatorKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Tenants' }).waitFor();
    const row = page.getByRole('row', { name: /Console Co/ });
    await expect(row.textContent()).resolves.toContain('sandbox');
    await expect(row.textContent()).resolves.toContain('30 days');
    // The figures come from the service's own metrics: one renewal ended reauth_required, and the sign-in
    // page's failed attempts are not renewals.
    const renewals = page.getByRole('article', { name: 'Renewals' });
    await expect(renewals.getByText('Need reconnecting').locator('xpath=following-sibling::dd').textContent()).resolves.toBe('1');
    // Connecting two users read /userinfo upstream twice: resource calls, counted as 2xx.
    const upstream2xx = await page
      .getByRole('article', { name: /Upstream calls/ })
      .getByText('2xx')
      .locator('xpath=following-sibling::dd')
      .textContent();
    expect(Number(upstream2xx)).toBeGreaterThanOrEqual(2);
    // No budget is configured here: nothing counted against one, and the tenant follows its environment's.
    const budgets = page.getByRole('article', { name: 'Upstream budgets' });
    await expect(budgets.getByText('Reads refused').locator('xpath=following-sibling::dd').textContent()).resolves.toBe('0');
    await expect(row.textContent()).resolves.toContain("the environment's");
    await shot('tenants');
  });

  it('finds the connection that needs reconnecting and shows why', async () => {
    await page.getByRole('link', { name: 'Connections of Console Co' }).click();
    await page.getByRole('heading', { level: 1, name: `Connections of ${TENANT}` }).waitFor();
    await page.getByLabel('Health').selectOption('reauth_required');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=reauth_required/);
    // The filtered page replaces the unfiltered one: bob (active) goes, alice stays.
    await page.getByRole('row', { name: /console-bob/ }).waitFor({ state: 'detached' });
    await page.getByRole('row', { name: /console-alice/ }).waitFor();
    await expect(page.getByRole('table').getByRole('row').count()).resolves.toBe(2); // the header and alice
    // The page shows what the API says went wrong, whatever the code.
    const lastError = (
      await t.request<{ connections: Array<{ lastError: { code: string } | null }> }>(
        'GET',
        `/v1/tenants/${TENANT}/connections?userId=console-alice`,
      )
    ).body.connections[0].lastError;
    expect(lastError?.code).toBe('refresh_token_rejected');
    const alice = page.getByRole('row', { name: /console-alice/ });
    await expect(alice.textContent()).resolves.toContain('reauth required');
    await expect(alice.textContent()).resolves.toContain(lastError!.code);
    await shot('connections');

    await alice.getByRole('link', { name: 'console-alice' }).click();
    await page.getByRole('heading', { level: 1, name: 'Connection console-alice' }).waitFor();
    const health = page.getByRole('region', { name: 'Health' });
    await expect(health.textContent()).resolves.toContain('The upstream refused the refresh token: the user must connect again.');
    await page
      .getByRole('table', { name: /Renewals/ })
      .getByRole('row', { name: /reauth/ })
      .first()
      .waitFor();
    await shot('connection');

    // Renew now answers why it cannot.
    await page.getByRole('button', { name: 'Renew now' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('reauth_required');
  });

  it('deletes a connection only after confirming', async () => {
    const bob = (await t.request<{ connections: Array<{ id: string }> }>('GET', `/v1/tenants/${TENANT}/connections?userId=console-bob`))
      .body.connections[0];
    await page.goto(`${t.url}/console/#/tenants/${TENANT}/connections/${bob.id}`);
    await page.getByRole('heading', { level: 1, name: 'Connection console-bob' }).waitFor();
    await page.getByRole('button', { name: 'Delete…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete connection console-bob?' });
    await dialog.waitFor();
    await expect(page.evaluate('document.activeElement.textContent')).resolves.toBe('Cancel');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect((await t.request('GET', `/v1/tenants/${TENANT}/connections/${bob.id}`)).status).toBe(200);

    await page.getByRole('button', { name: 'Delete…' }).click();
    await dialog.waitFor();
    await shot('connection-delete-confirm');
    await dialog.getByRole('button', { name: 'Delete connection' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Connection ${bob.id} deleted.` })
      .waitFor();
    expect((await t.request('GET', `/v1/tenants/${TENANT}/connections/${bob.id}`)).status).toBe(404);
  });

  it("lists a tenant's agent sessions and revokes one only after confirming", async () => {
    const minted = await t.request<{ id: string; token: string }>('POST', `/v1/tenants/${TENANT}/agent-sessions`, {
      body: { userId: 'console-alice', label: 'support assistant' },
    });
    expect(minted.status).toBe(201);
    await page.goto(`${t.url}/console/#/tenants/${TENANT}/agents`);
    await page.getByRole('heading', { level: 1, name: `Agent sessions of ${TENANT}` }).waitFor();
    const row = page.getByRole('row', { name: /support assistant/ });
    await expect(row.getByRole('cell').nth(0).textContent()).resolves.toBe('console-alice');
    await row.getByRole('button', { name: 'Revoke…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke agent session support assistant?' });
    await dialog.getByRole('button', { name: 'Revoke session' }).click();
    await page.getByRole('status').filter({ hasText: 'revoked' }).waitFor();
    await row.getByText('revoked').waitFor();
    const listed = await t.request<{ items: Array<{ id: string; status: string }> }>('GET', `/v1/tenants/${TENANT}/agent-sessions`);
    expect(listed.body.items.find((i) => i.id === minted.body.id)?.status).toBe('revoked');
    // The page never holds a token: the list carries none.
    expect((await Promise.all(bodies)).some((b) => b.text.includes(minted.body.token))).toBe(false);
  });

  it('redelivers a dead event and sees it delivered; then every dead event since a time', async () => {
    sinkUp = true;
    const events = (await t.request<{ events: EventItem[] }>('GET', `/v1/tenants/${TENANT}/events`)).body.events;
    const dead = events.filter((e) => e.delivery.state === 'dead');
    const first = dead[0];

    await page.getByRole('link', { name: `${TENANT}: events` }).click();
    await page.getByRole('heading', { level: 1, name: `Events of ${TENANT}` }).waitFor();
    const row = page.getByRole('row', { name: new RegExp(first.id) });
    await expect(row.textContent()).resolves.toContain('dead');
    expect(first.delivery.lastError).toBe('http_500');
    await expect(row.textContent()).resolves.toContain('http_500');
    await row.getByRole('button', { name: `Attempts of event ${first.id}` }).click();
    await page
      .getByRole('table', { name: 'Delivery attempts' })
      .getByRole('row', { name: /http_500/ })
      .first()
      .waitFor();
    await shot('events');

    await row.getByRole('button', { name: `Redeliver event ${first.id}` }).click();
    await row.getByText('delivered', { exact: true }).waitFor({ timeout: 20_000 });
    await waitUntil('the redelivered event at the sink', () => sink.accepted().some((d) => d.headers['webhook-id'] === first.id));
    await shot('events-redelivered');

    await page.getByLabel(/Redeliver every dead event received since/).fill('2000-01-01T00:00');
    await page.getByRole('button', { name: 'Redeliver dead events' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /dead events? since .* queued for delivery again/ })
      .waitFor();
    for (const e of dead.slice(1))
      await page
        .getByRole('row', { name: new RegExp(e.id) })
        .getByText('delivered', { exact: true })
        .waitFor({ timeout: 20_000 });
  });

  it("lists the tenant's endpoints with their health, a disabled one with its reason, never a secret", async () => {
    const pipeline = await WebhookSink.start();
    const gone = await WebhookSink.start();
    gone.respond = () => 410;
    try {
      const created: Array<{ id: string; secret: string }> = [];
      for (const body of [
        { url: pipeline.url, description: 'data pipeline', eventTypes: ['record.*', 'connection.created'] },
        { url: gone.url, description: 'old staging copy', eventTypes: ['record.*'] },
      ]) {
        const res = await t.request<{ id: string; secret: string }>('POST', `/v1/tenants/${TENANT}/endpoints`, { body });
        expect(res.status).toBe(201);
        created.push(res.body);
      }
      const [healthy, dead] = created;
      endpointSecrets['endpoint secret #1'] = healthy.secret;
      endpointSecrets['endpoint secret #2'] = dead.secret;
      await t.app.get(EventsRepository).record({ tenantId: TENANT, source: 'service', type: 'record.changed', payload: { id: 'r-1' } });
      await waitUntil('the pipeline delivery', () => pipeline.accepted().length === 1);
      await waitUntil('the 410 endpoint disabled', async () => {
        const res = await t.request<{ health: { state: string } }>('GET', `/v1/tenants/${TENANT}/endpoints/${dead.id}`);
        return res.body.health.state === 'disabled';
      });

      await page.getByRole('button', { name: 'Refresh list' }).click();
      const section = page.getByRole('region', { name: 'Endpoints' });
      const first = section.getByRole('row', { name: /data pipeline/ });
      await first.waitFor();
      await expect(first.textContent()).resolves.toMatch(/healthy/);
      await expect(first.textContent()).resolves.toContain('record.*, connection.created');
      await expect(first.textContent()).resolves.toContain('100.0 %');
      await expect(first.textContent()).resolves.toContain(pipeline.url);
      const disabled = section.getByRole('row', { name: /old staging copy/ });
      await expect(disabled.textContent()).resolves.toMatch(/disabled/);
      await expect(disabled.textContent()).resolves.toContain('it answered 410 Gone');
      await expect(disabled.textContent()).resolves.toContain('0.0 %');
      // eventsTargetUrl is the first row.
      await expect(section.getByRole('row').nth(1).textContent()).resolves.toContain('eventsTargetUrl');
      await expect(section.textContent()).resolves.not.toMatch(/whsec_/);
      await section.screenshot({ path: join(SHOTS, 'endpoints.png') });
      await shot('events-with-endpoints');
    } finally {
      await pipeline.close();
      await gone.close();
    }
  });

  it('shows the audit trail a page at a time: who signed in, who failed to, what the console deleted', async () => {
    await page.getByRole('link', { name: 'Audit trail' }).click();
    await page.getByRole('heading', { level: 1, name: 'Audit trail' }).waitFor();
    const deleted = page.getByRole('row', { name: /connection\.deleted/ });
    await expect(deleted.textContent()).resolves.toContain('Console session');
    await expect(deleted.textContent()).resolves.toContain('success');
    await expect(deleted.textContent()).resolves.toContain('user console-bob');
    const signedIn = page.getByRole('row', { name: /console\.login/ }).filter({ hasText: 'success' });
    await expect(signedIn.count()).resolves.toBe(1);
    // The two refused sign-ins: one row a minute, counted.
    const failed = (
      await t.request<{ items: Array<{ action: string; outcome: string; count: number }> }>('GET', '/v1/audit')
    ).body.items.filter((i) => i.action === 'console.login' && i.outcome === 'failure');
    expect(failed.reduce((n, i) => n + i.count, 0)).toBe(2);
    await expect(
      page
        .getByRole('row', { name: /console\.login/ })
        .filter({ hasText: 'failure' })
        .count(),
    ).resolves.toBe(failed.length);
    await shot('audit');

    // A tenant with more rows than a page: the console reads 50 at a time and pages on.
    expect(
      (
        await t.request('POST', '/v1/tenants', {
          body: { id: 'paged-co', name: 'Paged', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
        })
      ).status,
    ).toBe(201);
    for (let i = 0; i < 54; i++)
      expect((await t.request('POST', '/v1/tenants/paged-co/api-keys', { body: { name: `k${i}` } })).status).toBe(201);
    await page.getByLabel('Tenant id').fill('paged-co');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.waitForURL(/tenantId=paged-co/);
    await page.getByRole('link', { name: 'Next page' }).waitFor();
    await expect(page.getByRole('table').getByRole('row').count()).resolves.toBe(51); // the header and 50 rows
    await expect(page.getByRole('row', { name: /tenant\.created/ }).count()).resolves.toBe(0);
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.getByRole('row', { name: /tenant\.created/ }).waitFor();
    await expect(page.getByRole('table').getByRole('row').count()).resolves.toBe(6); // the header and the last 5
    await expect(page.getByRole('link', { name: 'Next page' }).count()).resolves.toBe(0);
    await shot('audit-paged');
    const auditCalls = requested.filter((u) => u.includes('/audit'));
    expect(auditCalls.length).toBeGreaterThanOrEqual(3);
    expect(auditCalls.every((u) => new URL(u).searchParams.get('limit') === '50')).toBe(true);

    await page.goto(`${t.url}/console/#/tenants/${TENANT}/audit`);
    await page.getByRole('heading', { level: 1, name: `Audit trail of ${TENANT}` }).waitFor();
    await page.getByRole('row', { name: /api_key\.created/ }).waitFor();
    await expect(page.getByRole('row', { name: /api_key\.created/ }).textContent()).resolves.toContain('Operator key');
  });

  it("shows each user's sync state: a ready copy with its records, one whose listing fails with its error and since when, never a record", async () => {
    const SYNCED = 'synced-co';
    expect(
      (
        await t.request('POST', '/v1/tenants', {
          body: { id: SYNCED, name: 'Synced Co', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
        })
      ).status,
    ).toBe(201);
    for (const as of ['carol', 'dave']) expect((await connectViaHttp(t, SYNCED, { userId: `sync-${as}`, as })).status).toBe('connected');
    const launched = await t.request('POST', `/v1/tenants/${SYNCED}/workflows`, {
      headers: { 'x-user-id': 'sync-carol' },
      body: { name: 'Confidential merger memo', approvers: [] },
    });
    expect(launched.status).toBe(201);
    expect((await t.request('PATCH', `/v1/tenants/${SYNCED}`, { body: { sync: { workflows: true } } })).status).toBe(200);
    type State = { userId: string; state: string; records: number; lastListedAt: string | null; lastError?: string };
    const stateOf = async (userId: string) =>
      (await t.request<{ items: State[] }>('GET', `/v1/tenants/${SYNCED}/sync?userId=${userId}`)).body.items[0];
    expect((await t.request('POST', `/v1/tenants/${SYNCED}/sync`, { body: { userId: 'sync-carol' } })).status).toBe(202);
    await waitUntil("carol's listing", async () => (await stateOf('sync-carol'))?.lastListedAt != null);
    // Dave's listing is refused upstream (the sandbox answers 403 to a first page, once).
    t.sandbox!.setListing({ pageSize: 100, fail: { page: 1, status: 403, times: 1 } });
    expect((await t.request('POST', `/v1/tenants/${SYNCED}/sync`, { body: { userId: 'sync-dave' } })).status).toBe(202);
    await waitUntil("dave's failed listing", async () => (await stateOf('sync-dave'))?.lastError !== undefined);
    t.sandbox!.setListing({ pageSize: null });
    const carol = await stateOf('sync-carol');
    expect(carol.records).toBeGreaterThanOrEqual(1);

    await page.goto(`${t.url}/console/#/`);
    await page.getByRole('link', { name: 'Sync of Synced Co' }).click();
    await page.getByRole('heading', { level: 1, name: `Synced records of ${SYNCED}` }).waitFor();
    const ready = page.getByRole('row', { name: /sync-carol/ });
    await ready.waitFor();
    const cells = async (row: typeof ready) => (await row.getByRole('cell').allTextContents()).join(' | ');
    const readyText = await cells(ready);
    expect(readyText).toContain('ready');
    expect(readyText).toContain(`${carol.lastListedAt!.slice(0, 10)} `);
    expect(readyText).toContain('on time');
    expect(readyText).toContain(` | ${carol.records} | none`);
    const failing = await cells(page.getByRole('row', { name: /sync-dave/ }));
    const dave = await stateOf('sync-dave');
    expect(failing).toContain(dave.state);
    expect(failing).toContain(` | ${dave.records} | `);
    expect(failing).toContain('GET /workflows answered 403 (page 1)');
    expect(failing).toMatch(/failing since \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
    // The user's link opens their connection.
    await ready.getByRole('link', { name: 'sync-carol' }).click();
    await page.getByRole('heading', { level: 1, name: 'Connection sync-carol' }).waitFor();
    await page.goBack();
    await page.getByRole('row', { name: /sync-dave/ }).waitFor();
    await shot('sync');
    // Figures only: the workflow's content is not on the page, nor in any answer the page received.
    await expect(page.content()).resolves.not.toContain('Confidential merger memo');
    expect((await Promise.all(bodies)).some((b) => b.text.includes('Confidential merger memo'))).toBe(false);
  });

  it('never sends the page a token, key or secret, and loads nothing from elsewhere', async () => {
    const cookie = (await context.cookies()).find((c) => c.name === 'cws_console');
    expect(cookie).toBeDefined();
    const received = await Promise.all(bodies);
    expect(received.length).toBeGreaterThan(10);
    const secrets = secretsOf(t, {
      ...endpointSecrets,
      'events secret': eventsSecret,
      'tenant API key': tenantKey,
      'console session': cookie!.value,
    });
    expect(Object.keys(endpointSecrets)).toHaveLength(2);
    expect(Object.keys(secrets).length).toBeGreaterThan(8);
    for (const { url, text } of received) {
      for (const [name, value] of Object.entries(secrets)) {
        if (text.includes(value)) throw new Error(`${url} answered with the ${name}`);
      }
    }
    expect(requested.filter((u) => !u.startsWith(`${t.url}/`) && !u.startsWith('data:'))).toEqual([]);
    // Nor do the service's logs hold the session's secret or the key typed at sign-in.
    const logs = t.logs.join('');
    expect(logs).toContain('/console/api/session');
    expect(logs).not.toContain(cookie!.value);
    expect(logs).not.toContain(t.operatorKey);
  });

  it('signs out: the session ends on the server and the cookie is gone', async () => {
    const cookie = (await context.cookies()).find((c) => c.name === 'cws_console')!;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in to the cws-connect console' }).waitFor();
    expect((await context.cookies()).find((c) => c.name === 'cws_console')).toBeUndefined();
    const replay = await fetch(`${t.url}/console/api/session`, { headers: { cookie: `cws_console=${cookie.value}` } });
    expect(replay.status).toBe(401);
    expect((await t.db.query('SELECT count(*)::int AS n FROM console_sessions')).rows[0].n).toBe(0);
  });
});

describe('console sessions: cookie, CSRF and what a session may not do', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  async function signIn(): Promise<{ cookie: string; csrf: string; setCookie: string }> {
    const res = await fetch(`${t.url}/console/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operatorKey: t.operatorKey }),
    });
    expect(res.status).toBe(201);
    const setCookie = res.headers.get('set-cookie') ?? '';
    const body = (await res.json()) as { csrfToken: string; expiresAt: string };
    expect(JSON.stringify(body)).not.toContain(t.operatorKey);
    return { cookie: setCookie.split(';')[0], csrf: body.csrfToken, setCookie };
  }

  it('sets an HttpOnly, SameSite=Strict cookie scoped to the service path, not Secure over http', async () => {
    const { setCookie } = await signIn();
    expect(setCookie).toMatch(/^cws_console=[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toMatch(/; HttpOnly/);
    expect(setCookie).toMatch(/; SameSite=Strict/);
    expect(setCookie).toMatch(/; Path=\//);
    expect(setCookie).toMatch(/; Expires=/);
    expect(setCookie).not.toMatch(/Secure/);
  });

  it('accepts the session on /v1 only with its CSRF token: none or a wrong one is 403', async () => {
    const { cookie, csrf } = await signIn();
    const get = (headers: Record<string, string>) => t.request<ErrorBody>('GET', '/v1/tenants', { key: null, headers });
    const none = await get({ cookie });
    expect(none.status).toBe(403);
    expect(none.body.error.code).toBe('forbidden');
    expect((await get({ cookie, 'x-csrf-token': `${csrf.slice(0, -2)}AA` })).status).toBe(403);
    expect((await get({ cookie, 'x-csrf-token': csrf })).status).toBe(200);
    expect((await t.request('GET', '/console/api/figures', { key: null, headers: { cookie } })).status).toBe(403);
    expect((await t.request('GET', '/console/api/figures', { key: null, headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(200);
    // The same tenant rule as for the key: an unknown tenant does not exist.
    const unknown = await t.request<ErrorBody>('GET', '/v1/tenants/no-such-co/api-keys', {
      key: null,
      headers: { cookie, 'x-csrf-token': csrf },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('tenant_not_found');
    // Nothing else stands in for the cookie.
    expect((await get({ 'x-csrf-token': csrf })).status).toBe(401);
  });

  it('refuses every route whose answer shows a secret, and changes nothing', async () => {
    const { cookie, csrf } = await signIn();
    const headers = { cookie, 'x-csrf-token': csrf };
    const created = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants', {
      body: { id: 'sessions-co', name: 'S', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    expect(created.status).toBe(201);
    const tries = [
      t.request<ErrorBody>('POST', '/v1/tenants', {
        key: null,
        headers,
        body: { id: 'by-cookie', name: 'B', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
      }),
      t.request<ErrorBody>('POST', '/v1/tenants/sessions-co/api-keys', { key: null, headers, body: {} }),
      t.request<ErrorBody>('POST', '/v1/tenants/sessions-co/events-secret', { key: null, headers }),
    ];
    for (const res of await Promise.all(tries)) {
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('forbidden');
    }
    expect((await t.request('GET', '/v1/tenants/by-cookie')).status).toBe(404);
    expect((await t.request<unknown[]>('GET', '/v1/tenants/sessions-co/api-keys')).body).toEqual([]);
    // The same session may read the tenant (without its secret).
    const read = await t.request('GET', '/v1/tenants/sessions-co', { key: null, headers });
    expect(read.status).toBe(200);
    expect(read.text).not.toContain(created.body.eventsSecret);
  });

  it('lets only the operator key sign in, as JSON', async () => {
    const sessions = async () => (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM console_sessions')).rows[0].n;
    const before = await sessions();
    const post = (body: string, type = 'application/json') =>
      fetch(`${t.url}/console/api/session`, { method: 'POST', headers: { 'content-type': type }, body });
    const wrong = await post(JSON.stringify({ operatorKey: `${t.operatorKey}x` }));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect((await post(JSON.stringify({}))).status).toBe(400);
    const form = await post(new URLSearchParams({ operatorKey: t.operatorKey }).toString(), 'application/x-www-form-urlencoded');
    expect(form.status).toBe(415);
    expect(form.headers.get('set-cookie')).toBeNull();
    await t.request('POST', '/v1/tenants', {
      body: { id: 'keyed-co', name: 'K', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] },
    });
    const tenantKey = (await t.request<{ key: string }>('POST', '/v1/tenants/keyed-co/api-keys', { body: {} })).body.key;
    expect((await post(JSON.stringify({ operatorKey: tenantKey }))).status).toBe(401);
    expect(await sessions()).toBe(before);
  });

  it('is served by every instance on the same database, and signing out ends it on all of them', async () => {
    const { cookie, csrf } = await signIn();
    const other = await startSecondInstance(t);
    try {
      const headers = { cookie, 'x-csrf-token': csrf };
      expect((await other.request('GET', '/v1/tenants', { key: null, headers })).status).toBe(200);
      expect((await t.request('DELETE', '/console/api/session', { key: null, headers })).status).toBe(204);
      expect((await other.request('GET', '/v1/tenants', { key: null, headers })).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('ends a session when it expires, on every route', async () => {
    const { cookie, csrf } = await signIn();
    await t.db.query(`UPDATE console_sessions SET expires_at = now() - interval '1 second'`);
    expect((await t.request('GET', '/v1/tenants', { key: null, headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(401);
    expect((await t.request('GET', '/console/api/session', { key: null, headers: { cookie } })).status).toBe(401);
  });

  it('serves the built page with a strict content policy; an unknown file is a JSON 404', async () => {
    const res = await fetch(`${t.url}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html);
    expect(script).not.toBeNull();
    expect((await fetch(`${t.url}/console/${script![1]}`)).status).toBe(200);
    const missing = await t.request<ErrorBody>('GET', '/console/assets/nothing.js', { key: null });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    expect((await t.request('GET', '/console/assets/..%2Fpackage.json', { key: null })).status).toBe(404);
  });
});
