import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { API_BASE, RecordingUpstream } from './recording-upstream.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** node:http sends the target byte for byte (fetch would resolve dots and re-encode). */
function send(t: TestApp, method: string, target: string, headers: Record<string, string>): Promise<Answer> {
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path: target, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A request line the HTTP client would refuse to write (raw NUL, spaces...): written on a socket. */
function sendRaw(t: TestApp, requestLine: string, headers: string): Promise<string> {
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(`${requestLine}\r\nhost: x\r\n${headers}connection: close\r\n\r\n`));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
  });
}

/**
 * The proxy never leaves its base, and the token follows the canonical path: every variant below is sent
 * through the facade to a recording upstream whose API base has a path prefix; it fails the suite if any call
 * leaves the prefix (however a server reads it) or carries another token than the rule gives.
 */
describe('the proxied path: one canonical form for the base check and the token', () => {
  let t: TestApp;
  let upstream: RecordingUpstream;
  let auth: Record<string, string>;

  beforeAll(async () => {
    upstream = await RecordingUpstream.start();
    t = await startTestApp({ env: { CWS_SANDBOX_API_URL: `${upstream.url}${API_BASE}`, UPSTREAM_RETRIES: '0' } });
    upstream.target = t.sandbox!.url;
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    await connectViaHttp(t, 'acme', { kind: 'admin', as: 'admin' });
    auth = { authorization: `Bearer ${t.operatorKey}`, 'x-user-id': 'u-alice' };
    upstream.expectUser = 'alice';
  });
  afterEach(() => {
    expect(upstream.violations).toEqual([]);
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  async function refused(method: string, target: string, code: string): Promise<void> {
    const before = upstream.calls.length;
    const res = await send(t, method, target, auth);
    const body = JSON.parse(res.text) as { error: { code: string; requestId: string } };
    expect([target, res.status, body.error.code]).toEqual([target, 400, code]);
    expect(body.error.requestId).toBe(res.headers['x-request-id']);
    expect([target, upstream.calls.slice(before)]).toEqual([target, []]);
  }

  // Separators, encodings, double encoding, dot forms: each is refused and nothing goes upstream.
  const refusedProxyPaths = [
    'webhooks/x\\..\\..\\workflows',
    'x\\..\\..\\oauth\\token',
    '..\\..\\oauth\\token',
    'workflows\\..\\webhooks',
    'webhooks%2F..%2F..%2Fworkflows',
    'webhooks%2f..%2f..%2fworkflows',
    'webhooks%5C..%5C..%5Cworkflows',
    'webhooks%5c..%5cworkflows',
    'x/%2e%2e/%2e%2e/workflows',
    'x/%2E%2E/%2e%2E/oauth/token',
    '%2e%2e/%2e%2e/oauth/token',
    '..%2F..%2Foauth%2Ftoken',
    '.%2e/.%2e/oauth/token',
    '%2e./workflows',
    '../../oauth/token',
    'workflows/../../../etc/passwd',
    'workflows/../oauth/token',
    'workflows/..',
    './workflows',
    'workflows/./x',
    'workflows/%2e/x',
    '%252e%252e/%252e%252e/oauth/token',
    '%252E%252E%252F%252E%252E%252Foauth',
    'webhooks%252F..%252Fworkflows',
    '%25%32%65%25%32%65/oauth',
    '%c0%ae%c0%ae/%c0%ae%c0%ae/oauth/token',
    '%e0%80%ae%e0%80%ae/oauth',
    'workflows%00',
    'workflows%00/../webhooks',
    'workflows%0d%0aX-Injected:%201',
    'workflows%09',
    'a//b',
    '/workflows',
    '//evil.example/workflows',
    'workflows%23/../../x',
    'workflows%',
    'workflows%zz',
  ];
  it.each(refusedProxyPaths)('refuses /proxy/%s with 400 invalid_path, nothing sent', async (rest) => {
    await refused('GET', `/v1/tenants/acme/proxy/${rest}`, 'invalid_path');
  });

  it.each(['POST', 'PUT', 'DELETE', 'PATCH'])('refuses a dot path for %s too', async (method) => {
    await refused(method, '/v1/tenants/acme/proxy/webhooks/..%2F..%2Fworkflows', 'invalid_path');
  });

  // Typed routes: a parameter is one plain segment; NUL is validation_failed.
  it.each([
    ['GET', '/v1/tenants/acme/workflows/..', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/%2e%2e', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/..%2F..%2Fwebhooks', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/..%5C..%5Cwebhooks', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/..\\..\\webhooks', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/%252e%252e', 'invalid_path'],
    ['PATCH', '/v1/tenants/acme/workflows/%2E%2E/approvals', 'invalid_path'],
    ['POST', '/v1/tenants/acme/workflows/..%2fwebhooks/upload-signed', 'invalid_path'],
    ['GET', '/v1/tenants/acme/workflows/%00', 'validation_failed'],
    ['GET', '/v1/tenants/acme/workflows/wf%001', 'validation_failed'],
    ['PATCH', '/v1/tenants/acme/workflows/%00/approvals', 'validation_failed'],
    ['GET', '/v1/tenants/ac%00me/workflows', 'validation_failed'],
  ])('refuses %s %s with %s', async (method, target, code) => {
    await refused(method, target, code);
  });

  it('refuses a raw NUL in the request target in the contract shape, nothing sent', async () => {
    const before = upstream.calls.length;
    for (const target of ['/v1/tenants/acme/workflows/wf\u00001', '/v1/tenants/acme/proxy/workflows\u0000/../webhooks']) {
      const answer = await sendRaw(t, `GET ${target} HTTP/1.1`, `authorization: Bearer ${t.operatorKey}\r\nx-user-id: u-alice\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain('"code":"validation_failed"');
    }
    expect(upstream.calls.slice(before)).toEqual([]);
  });

  // Request-target forms other than a path: absolute form (also with an escaping path), asterisk form.
  it.each([
    (h: string) => `http://${h}/v1/tenants/acme/proxy/workflows`,
    (h: string) => `http://${h}/v1/tenants/acme/workflows`,
    (_h: string) => `http://evil.example/v1/tenants/acme/proxy/webhooks/../workflows`,
    (h: string) => `HTTP://${h}/v1/tenants/acme/proxy/x/../../oauth/token`,
  ])('refuses the absolute-form target %#', async (form) => {
    await refused('GET', form(new URL(t.url).host), 'invalid_path');
  });

  it('refuses an asterisk-form target in the contract shape; an authority-form CONNECT is closed unanswered', async () => {
    const before = upstream.calls.length;
    const asterisk = await sendRaw(t, 'OPTIONS * HTTP/1.1', '');
    expect(asterisk).toMatch(/^HTTP\/1\.1 400 /);
    expect(asterisk).toContain('"code":"invalid_path"');
    expect(await sendRaw(t, `CONNECT ${new URL(upstream.url).host} HTTP/1.1`, '')).toBe('');
    expect(upstream.calls.slice(before)).toEqual([]);
  });

  // What does go out: a plain path, under the base, with the token the canonical path calls for.
  it.each([
    ['workflows', `${API_BASE}/workflows`, 'alice'],
    ['workflows/', `${API_BASE}/workflows/`, 'alice'],
    ['workflows?step=Create&x=..%2F..%2F&y=a\\b', `${API_BASE}/workflows?step=Create&x=..%2F..%2F&y=a\\b`, 'alice'],
    ['workflows/wf_none', `${API_BASE}/workflows/wf_none`, 'alice'],
    ['webhooks', `${API_BASE}/webhooks`, 'admin'],
    ['webhooks/h1', `${API_BASE}/webhooks/h1`, 'admin'],
    ['Webhooks', `${API_BASE}/Webhooks`, 'admin'],
    ['%77ebhooks', `${API_BASE}/%77ebhooks`, 'admin'],
    ['webhooksx', `${API_BASE}/webhooksx`, 'alice'],
    ['workflows%2Dx', `${API_BASE}/workflows%2Dx`, 'alice'],
    ['a..b/c.d', `${API_BASE}/a..b/c.d`, 'alice'],
  ])('sends /proxy/%s as %s with the %s token', async (rest, sent, user) => {
    const before = upstream.calls.length;
    const res = await send(t, 'GET', `/v1/tenants/acme/proxy/${rest}`, auth);
    expect(res.headers['x-upstream-status']).toBe(String(res.status));
    expect(upstream.calls.slice(before)).toEqual([{ method: 'GET', target: sent, user }]);
  });

  it('sends typed routes under the base with the user token', async () => {
    const before = upstream.calls.length;
    expect((await send(t, 'GET', '/v1/tenants/acme/workflows?x=1', auth)).status).toBe(200);
    expect((await send(t, 'GET', '/v1/tenants/acme/me', auth)).status).toBe(200);
    expect(upstream.calls.slice(before)).toEqual([
      { method: 'GET', target: `${API_BASE}/workflows?x=1`, user: 'alice' },
      { method: 'GET', target: `${API_BASE}/userinfo`, user: 'alice' },
    ]);
  });

  it('the recording upstream itself fails on a call outside the base or with the wrong token', async () => {
    // The guard of this suite must be able to fail: a direct call past the app breaches both rules.
    const probe = await RecordingUpstream.start();
    probe.target = t.sandbox!.url;
    probe.expectUser = 'alice';
    const bob = t.sandbox!.issueTokens('bob').access_token;
    await fetch(`${probe.url}${API_BASE}/x/..%2F..%2Foauth/token`, { headers: { authorization: `Bearer ${bob}` } });
    await fetch(`${probe.url}${API_BASE}/workflows`, { headers: { authorization: `Bearer ${bob}` } });
    await fetch(`${probe.url}${API_BASE}/webhooks`, { headers: { authorization: `Bearer ${bob}` } });
    expect(probe.violations).toEqual([
      expect.stringContaining('leaves'),
      expect.stringContaining("bob's token, not alice's"),
      expect.stringContaining("under /webhooks with bob's token"),
    ]);
    await probe.close();
  });
});
