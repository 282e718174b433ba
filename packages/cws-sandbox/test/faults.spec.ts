import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call, tokenRequest } from './helpers.js';

describe('fault injection', () => {
  let sandbox: SandboxServer;
  let token: string;
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'] });
    token = sandbox.issueTokens('alice').access_token;
  });
  afterAll(() => sandbox.close());
  afterEach(() => sandbox.setFault(null));

  const list = () => call(sandbox.url, 'GET', '/workflows', { token });
  const refresh = () =>
    tokenRequest(sandbox, {
      grant_type: 'refresh_token',
      refresh_token: 'x',
      client_id: sandbox.clientId,
      client_secret: sandbox.clientSecret,
    });

  it('status: answers the status with Retry-After, on the given paths, for the next `count` requests', async () => {
    sandbox.setFault({ mode: 'status', status: 429, retryAfterSeconds: 7, paths: ['/oauth/token'], count: 2 });
    const first = await refresh();
    expect(first.status).toBe(429);
    expect(first.headers.get('retry-after')).toBe('7');
    expect((await list()).status).toBe(200);
    expect((await refresh()).status).toBe(429);
    expect((await refresh()).status).toBe(400); // fault used up: the real answer (unknown refresh token)
    expect(
      sandbox
        .records()
        .map((r) => r.outcome)
        .slice(-4),
    ).toEqual(['fault_status', 'ok', 'fault_status', 'unknown_refresh_token']);
  });

  it('status without limits applies to every path until cleared', async () => {
    sandbox.setFault({ mode: 'status', status: 503 });
    expect((await list()).status).toBe(503);
    expect((await call(sandbox.url, 'GET', '/userinfo', { token })).status).toBe(503);
    sandbox.setFault(null);
    expect((await list()).status).toBe(200);
  });

  it('down: drops the connection without an answer', async () => {
    sandbox.setFault({ mode: 'down', paths: ['/workflows'], count: 1 });
    await expect(fetch(`${sandbox.url}/workflows`, { headers: { authorization: `Bearer ${token}` } })).rejects.toThrow();
    expect(sandbox.records().at(-1)).toMatchObject({ path: '/workflows', status: 0, outcome: 'fault_down' });
    expect((await list()).status).toBe(200);
  });

  it('slow: delays the answer on the given paths only', async () => {
    sandbox.setFault({ mode: 'slow', delayMs: 300, paths: ['/workflows'] });
    const answered: string[] = [];
    const statuses = await Promise.all([
      list().then((r) => (answered.push('/workflows'), r.status)),
      call(sandbox.url, 'GET', '/userinfo', { token }).then((r) => (answered.push('/userinfo'), r.status)),
    ]);
    expect(statuses).toEqual([200, 200]);
    // Sent together: the path without the fault is answered first, the slowed one after it (no clock is read:
    // the order is the observable effect of the delay).
    expect(answered).toEqual(['/userinfo', '/workflows']);
  });

  it('never applies to /_sandbox/ paths, which also set and clear faults over HTTP', async () => {
    const set = await call(sandbox.url, 'POST', '/_sandbox/fault', { json: { mode: 'down' } });
    expect(set.body).toEqual({ fault: { mode: 'down' } });
    const stats = await call(sandbox.url, 'GET', '/_sandbox/stats');
    expect(stats.status).toBe(200);
    await expect(fetch(`${sandbox.url}/userinfo`)).rejects.toThrow();
    await call(sandbox.url, 'POST', '/_sandbox/fault', { json: { mode: 'none' } });
    expect((await call(sandbox.url, 'GET', '/_sandbox/fault')).body).toEqual({ fault: null });
    expect((await list()).status).toBe(200);
  });

  it('refuses malformed faults', async () => {
    for (const json of [
      {},
      { mode: 'boom' },
      { mode: 'status' },
      { mode: 'status', status: 99 },
      { mode: 'slow', delayMs: -1 },
      { mode: 'down', count: 0 },
      { mode: 'down', paths: ['workflows'] },
      { mode: 'down', delayMs: 5 },
    ]) {
      const answer = await call(sandbox.url, 'POST', '/_sandbox/fault', { json });
      expect([JSON.stringify(json), answer.status]).toEqual([JSON.stringify(json), 400]);
    }
    expect(() => sandbox.setFault({ mode: 'status', status: 1000 })).toThrow();
  });
});
