import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { cookieName } from '../../src/connect/connect-state.store.js';
import { authorizeAtSandbox, newTenant, openCallback, type BrowserCallback } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import type { ErrorBody } from './support.js';

/**
 * The OAuth state is bound to the browser that opened the connect link (RFC 6749 §10.12, RFC 9700 §4.7).
 * Two browsers, each in the middle of its own flow: whatever mix of code, state and cookies one of them
 * presents at the callback, only the browser that started a flow completes it, and a refused attempt
 * consumes nothing (no state, no code at the upstream) that the rightful browser still needs.
 */

interface Flow extends BrowserCallback {
  userId: string;
  state: string;
  code: string;
}

describe('the OAuth state is bound to the browser that started the flow', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A browser opens a fresh connect link of `userId` and approves as the sandbox user `as`; it stops before the callback. */
  async function startFlow(userId: string, as: string): Promise<Flow> {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId, returnUrl: 'http://localhost:5173/done' },
    });
    expect(session.status).toBe(201);
    const callback = await authorizeAtSandbox(session.body.connectUrl, as, 'approve');
    const url = new URL(callback.url);
    return { ...callback, userId, state: url.searchParams.get('state')!, code: url.searchParams.get('code')! };
  }

  const callbackUrl = (params: Record<string, string>) => `${t.url}/oauth/callback?${new URLSearchParams(params).toString()}`;
  const tokenCalls = () => t.sandbox!.records().filter((r) => r.path === '/oauth/token').length;
  const completedAt = async (state: string) =>
    (
      await t.db.query<{ completed_at: Date | null }>('SELECT completed_at FROM connect_sessions WHERE state_hash = $1', [
        createHash('sha256').update(state).digest(),
      ])
    ).rows[0]?.completed_at;
  const connectionOf = async (userId: string) =>
    (
      await t.db.query<{ upstream_user_id: string }>(`SELECT upstream_user_id FROM connections WHERE tenant_id = 'acme' AND user_id = $1`, [
        userId,
      ])
    ).rows[0]?.upstream_user_id ?? null;

  async function expectRefused(res: Response, label: string): Promise<void> {
    const text = await res.text();
    if (res.headers.get('content-type')?.includes('text/html')) {
      expect([label, res.status, text.includes('connect_state_invalid')]).toEqual([label, 400, true]);
    } else {
      expect([label, res.status, (JSON.parse(text) as ErrorBody).error.code]).toEqual([label, 400, 'connect_state_invalid']);
    }
    expect([label, res.headers.get('location')]).toEqual([label, null]);
  }

  async function expectCompletes(flow: Flow, upstreamUser: string): Promise<void> {
    const res = await openCallback(flow);
    expect([flow.userId, res.status]).toEqual([flow.userId, 302]);
    expect(new URL(res.headers.get('location')!).searchParams.get('status')).toBe('connected');
    expect(await connectionOf(flow.userId)).toBe(upstreamUser);
  }

  /** Each attempt is made by `attacker` against `victim`'s flow (or the reverse), then both flows must still complete. */
  const crossOvers: Array<{ label: string; attempt: (victim: Flow, attacker: Flow) => Promise<Response> }> = [
    { label: "the victim's whole callback URL, from the attacker's browser", attempt: (v, a) => openCallback(v, { cookie: a.cookie }) },
    { label: "the victim's whole callback URL, from a browser without cookies", attempt: (v) => openCallback(v, { cookie: '' }) },
    {
      label: "the attacker's code with the victim's state, from the attacker's browser",
      attempt: (v, a) => openCallback({ url: callbackUrl({ code: a.code, state: v.state }), cookie: a.cookie }),
    },
    {
      label: "the attacker's code with the victim's state, no cookies",
      attempt: (v, a) => openCallback({ url: callbackUrl({ code: a.code, state: v.state }), cookie: '' }),
    },
    {
      label: "the attacker's own callback, pushed into the victim's browser (login CSRF)",
      attempt: (v, a) => openCallback(a, { cookie: v.cookie }),
    },
    {
      label: "the attacker's state with the victim's code, in the victim's browser",
      attempt: (v, a) => openCallback({ url: callbackUrl({ code: v.code, state: a.state }), cookie: v.cookie }),
    },
    {
      label: "the victim's state with the attacker's binding value under the victim's cookie name",
      attempt: (v, a) => openCallback(v, { cookie: `${cookieName(v.state)}=${a.cookie.split('=')[1]}` }),
    },
    {
      label: "the victim's state with a forged binding value",
      attempt: (v) => openCallback(v, { cookie: `${cookieName(v.state)}=${randomBytes(32).toString('base64url')}` }),
    },
    { label: "the victim's state with an empty binding value", attempt: (v) => openCallback(v, { cookie: `${cookieName(v.state)}=` }) },
    {
      label: "both browsers' cookies but the victim's state and the attacker's code",
      attempt: (v, a) =>
        openCallback(
          { url: callbackUrl({ code: a.code, state: v.state }), cookie: a.cookie },
          { cookie: `${a.cookie}; x=${v.cookie.split('=')[1]}` },
        ),
    },
    {
      label: 'an error callback cancelling the victim’s flow, from the attacker',
      attempt: (v, a) => openCallback({ url: callbackUrl({ error: 'access_denied', state: v.state }), cookie: a.cookie }),
    },
    {
      label: 'an error callback for the victim’s state, no cookies',
      attempt: (v) => openCallback({ url: callbackUrl({ error: 'access_denied', state: v.state }), cookie: '' }),
    },
    {
      label: 'a callback with neither code nor error for the victim’s state, from the attacker',
      attempt: (v, a) => openCallback({ url: callbackUrl({ state: v.state }), cookie: a.cookie }),
    },
    {
      label: "the victim's callback from the attacker's browser, asking for HTML",
      attempt: (v, a) => openCallback(v, { cookie: a.cookie, headers: { accept: 'text/html' } }),
    },
  ];

  it.each(crossOvers.map((c, i) => [c.label, c, i] as const))(
    '%s: refused, nothing consumed, both flows still complete',
    async (label, c, i) => {
      const victim = await startFlow(`u-victim-${i}`, 'alice');
      const attacker = await startFlow(`u-attacker-${i}`, 'bob');
      const tokenCallsBefore = tokenCalls();

      await expectRefused(await c.attempt(victim, attacker), label);

      expect(tokenCalls()).toBe(tokenCallsBefore); // no code was exchanged (or burned) at the upstream
      expect(await completedAt(victim.state)).toBeNull();
      expect(await completedAt(attacker.state)).toBeNull();
      expect(await connectionOf(victim.userId)).toBeNull();
      await expectCompletes(victim, 'alice');
      await expectCompletes(attacker, 'bob');
    },
  );

  it('the cookie: HttpOnly, SameSite=Lax, scoped to the callback, as long-lived as the state, 256 random bits, only its hash stored', async () => {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-cookie', returnUrl: 'http://localhost:5173/done' },
    });
    const opened = await fetch(session.body.connectUrl, { redirect: 'manual' });
    expect(opened.status).toBe(302);
    const state = new URL(opened.headers.get('location')!).searchParams.get('state')!;
    const [setCookie, ...others] = opened.headers.getSetCookie();
    expect(others).toEqual([]);
    const [pair, ...attributes] = setCookie.split(';').map((s) => s.trim());
    const [name, value] = pair.split('=');
    expect(name).toBe(cookieName(state));
    expect(value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(attributes.map((a) => a.toLowerCase())).toEqual(
      expect.arrayContaining(['httponly', 'samesite=lax', 'path=/oauth/callback', 'max-age=600']),
    );
    expect(attributes.map((a) => a.toLowerCase())).not.toContain('secure'); // http PUBLIC_URL here; https gets Secure
    const row = await t.db.query<{ browser_hash: Buffer }>(`SELECT browser_hash FROM connect_sessions WHERE user_id = 'u-cookie'`);
    expect(row.rows[0].browser_hash.equals(createHash('sha256').update(value).digest())).toBe(true);
    expect(JSON.stringify((await t.db.query(`SELECT * FROM connect_sessions WHERE user_id = 'u-cookie'`)).rows)).not.toContain(value);
    expect(t.logs.join('')).not.toContain(value);
  });

  it('a used state is refused even with its own cookie, and the cookie is cleared when it is used', async () => {
    const flow = await startFlow('u-once', 'carol');
    const first = await openCallback(flow);
    expect(first.status).toBe(302);
    const cleared = first.headers.getSetCookie().find((c) => c.startsWith(`${cookieName(flow.state)}=`));
    expect(cleared).toMatch(/Expires=Thu, 01 Jan 1970/);
    await expectRefused(await openCallback(flow), 'replay with the right cookie');
  });

  it('one browser running two flows at once keeps both (one cookie per state), in either order', async () => {
    const first = await startFlow('u-tab-1', 'alice');
    const second = await startFlow('u-tab-2', 'dave');
    const jar = `${first.cookie}; ${second.cookie}`;
    const secondBack = await openCallback(second, { cookie: jar });
    expect(secondBack.status).toBe(302);
    const firstBack = await openCallback(first, { cookie: jar });
    expect(firstBack.status).toBe(302);
    expect(await connectionOf('u-tab-1')).toBe('alice');
    expect(await connectionOf('u-tab-2')).toBe('dave');
  });

  it("a refused cross-over leaves the victim's flow able to end with Deny too", async () => {
    const session = await t.request<{ connectUrl: string }>('POST', '/v1/tenants/acme/connect-sessions', {
      body: { kind: 'user', userId: 'u-deny', returnUrl: 'http://localhost:5173/done' },
    });
    const denied = await authorizeAtSandbox(session.body.connectUrl, 'alice', 'deny');
    const attacker = await startFlow('u-deny-attacker', 'bob');
    await expectRefused(await openCallback(denied, { cookie: attacker.cookie }), 'deny callback from another browser');
    const back = await openCallback(denied);
    expect(back.status).toBe(302);
    expect(Object.fromEntries(new URL(back.headers.get('location')!).searchParams)).toMatchObject({
      status: 'error',
      error: 'access_denied',
    });
  });
});
