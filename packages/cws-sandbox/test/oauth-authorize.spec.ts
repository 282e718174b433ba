import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { authorizePath, call, decideConsent, hiddenFields } from './helpers.js';

const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const REDIRECT_WITH_QUERY = 'http://127.0.0.1:9/cb?tenant=t1';

describe('GET/POST /oauth/authorize (spec 4.1)', () => {
  let sandbox: SandboxServer;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: [REDIRECT, REDIRECT_WITH_QUERY] });
  });
  afterAll(() => sandbox.close());

  const get = (path: string) => call(sandbox.url, 'GET', path);

  it('renders a login and consent page with the client, the scopes, the users and stable buttons', async () => {
    const page = await get(authorizePath(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read userinfo.read', rawState: 'xyz' }));
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).toContain('cws-connect');
    expect(page.text).toContain('<code>workflows.read</code>');
    expect(page.text).toContain('<code>userinfo.read</code>');
    expect(page.text).not.toContain('<code>webhooks.manage</code>');
    for (const user of sandbox.users()) expect(page.text).toContain(`value="${user.id}"`);
    expect(page.text).toContain('Ada Admin');
    expect(page.text).toContain('(company admin)');
    expect(page.text).toContain('<button type="submit" name="decision" value="approve">Approve</button>');
    expect(page.text).toMatch(/<button type="submit" name="decision" value="deny"[^>]*>Deny<\/button>/);
    const hidden = hiddenFields(page.text);
    expect(hidden).toMatchObject({
      client_id: sandbox.clientId,
      redirect_uri: REDIRECT,
      scope: 'workflows.read userinfo.read',
      state: 'xyz',
    });
    expect(hidden.request_id).toMatch(/^[A-Za-z0-9_-]{32}$/);
  });

  it('approve: 302 to the redirect URI with code and the state byte-for-byte', async () => {
    const rawState = 'a%2Bb+c%20d%26e%3D%C3%A9~._-';
    const location = await decideConsent(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read', rawState }, 'approve', 'alice');
    expect(location.startsWith(`${REDIRECT}?code=`)).toBe(true);
    expect(location.endsWith(`&state=${rawState}`)).toBe(true);
    expect(new URL(location).searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('approve without state: no state parameter at all', async () => {
    const location = await decideConsent(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read' }, 'approve', 'bob');
    const url = new URL(location);
    expect(url.searchParams.has('state')).toBe(false);
    expect(url.searchParams.get('code')).toBeTruthy();
  });

  it('appends to a redirect URI that already has a query', async () => {
    const location = await decideConsent(
      sandbox,
      { redirectUri: REDIRECT_WITH_QUERY, scope: 'workflows.read', rawState: 's1' },
      'approve',
      'bob',
    );
    expect(location).toMatch(/^http:\/\/127\.0\.0\.1:9\/cb\?tenant=t1&code=[A-Za-z0-9_-]+&state=s1$/);
  });

  it('deny: 302 with error=access_denied and the state', async () => {
    const location = await decideConsent(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read', rawState: 'st-9' }, 'deny');
    const url = new URL(location);
    expect(`${url.origin}${url.pathname}`).toBe(REDIRECT);
    expect(url.searchParams.get('error')).toBe('access_denied');
    expect(url.searchParams.get('state')).toBe('st-9');
    expect(url.searchParams.has('code')).toBe(false);
  });

  it('a pending request answers one decision only, and a tampered copy is refused', async () => {
    const page = await get(authorizePath(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read', rawState: 'one' }));
    const fields = hiddenFields(page.text);
    const post = (extra: Record<string, string>) =>
      call(sandbox.url, 'POST', '/oauth/authorize', {
        body: new URLSearchParams({ ...fields, user: 'alice', decision: 'approve', ...extra }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
    const tampered = await post({ redirect_uri: REDIRECT_WITH_QUERY });
    expect(tampered.status).toBe(400);
    expect((await post({ scope: 'workflows.read workflows.write' })).status).toBe(400);
    expect((await post({ request_id: 'forged' })).status).toBe(400);
    const noUser = await call(sandbox.url, 'POST', '/oauth/authorize', {
      body: new URLSearchParams({ ...fields, decision: 'approve' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(noUser.status).toBe(400);
    expect(noUser.text).toContain('Choose the user');
    expect((await post({ user: 'mallory' })).status).toBe(400);
    const first = await post({});
    expect(first.status).toBe(302);
    const again = await post({});
    expect(again.status).toBe(400);
    expect(again.headers.get('location')).toBeNull();
  });

  it('the decision must be posted as a form', async () => {
    const answer = await call(sandbox.url, 'POST', '/oauth/authorize', { json: { decision: 'approve' } });
    expect(answer.status).toBe(415);
  });

  describe('a bad client_id or redirect_uri gets an error page, never a redirect', () => {
    const cases: Array<[string, string]> = [
      [
        'unknown client_id',
        `/oauth/authorize?response_type=code&client_id=other-client&redirect_uri=${encodeURIComponent(REDIRECT)}&scope=workflows.read`,
      ],
      ['missing client_id', `/oauth/authorize?response_type=code&redirect_uri=${encodeURIComponent(REDIRECT)}&scope=workflows.read`],
      ['unregistered redirect_uri', 'REDIRECT:http://127.0.0.1:9/other'],
      ['redirect_uri with a trailing slash', `REDIRECT:${REDIRECT}/`],
      ['redirect_uri differing in case', `REDIRECT:${REDIRECT.replace('callback', 'Callback')}`],
      ['redirect_uri with an extra query', `REDIRECT:${REDIRECT}?x=1`],
      ['missing redirect_uri', 'REDIRECT:'],
    ];
    it.each(cases)('%s', async (_name, spec) => {
      let path = spec;
      if (spec.startsWith('REDIRECT:')) {
        const uri = spec.slice('REDIRECT:'.length);
        path = `/oauth/authorize?response_type=code&client_id=${sandbox.clientId}&scope=workflows.read&state=s${uri ? `&redirect_uri=${encodeURIComponent(uri)}` : ''}`;
      }
      const answer = await get(path);
      expect(answer.status).toBe(400);
      expect(answer.headers.get('location')).toBeNull();
      expect(answer.headers.get('content-type')).toContain('text/html');
    });

    it('a repeated redirect_uri', async () => {
      const answer = await get(
        `${authorizePath(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read' })}&redirect_uri=${encodeURIComponent(REDIRECT)}`,
      );
      expect(answer.status).toBe(400);
    });
  });

  describe('other errors redirect with error and state', () => {
    const base = () => `/oauth/authorize?client_id=${sandbox.clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}&state=keep%2Fme`;
    const cases: Array<[string, string, string]> = [
      ['response_type token', '&response_type=token&scope=workflows.read', 'unsupported_response_type'],
      ['missing response_type', '&scope=workflows.read', 'invalid_request'],
      ['missing scope', '&response_type=code', 'invalid_request'],
      ['empty scope', '&response_type=code&scope=', 'invalid_scope'],
      ['unregistered scope', '&response_type=code&scope=workflows.read%20admin.all', 'invalid_scope'],
      ['duplicate scope', '&response_type=code&scope=workflows.read%20workflows.read', 'invalid_scope'],
      ['double space', '&response_type=code&scope=workflows.read%20%20userinfo.read', 'invalid_scope'],
      ['comma separated', '&response_type=code&scope=workflows.read,userinfo.read', 'invalid_scope'],
      ['repeated scope parameter', '&response_type=code&scope=workflows.read&scope=userinfo.read', 'invalid_request'],
    ];
    it.each(cases)('%s → %s', async (_name, extra, error) => {
      const answer = await get(base() + extra);
      expect(answer.status).toBe(302);
      const location = answer.headers.get('location') ?? '';
      expect(location.startsWith(`${REDIRECT}?error=${error}&`)).toBe(true);
      expect(location.endsWith('&state=keep%2Fme')).toBe(true);
    });
  });

  it('records the calls without the code', async () => {
    sandbox.clearRecords();
    const location = await decideConsent(sandbox, { redirectUri: REDIRECT, scope: 'workflows.read', rawState: 'r' }, 'approve', 'alice');
    const code = new URL(location).searchParams.get('code') ?? '';
    const records = sandbox.records();
    expect(records.map((r) => [r.method, r.path, r.status, r.outcome, r.bodyFormat])).toEqual([
      ['GET', '/oauth/authorize', 200, 'consent_page', 'none'],
      ['POST', '/oauth/authorize', 302, 'code_issued', 'form'],
    ]);
    expect(JSON.stringify(records)).not.toContain(code);
  });
});
