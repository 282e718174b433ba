import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { SandboxConfigError } from '../src/sandbox-config.js';
import { call } from './helpers.js';

describe('rate limits per company (option quotas, POST /_sandbox/quotas)', () => {
  let sandbox: SandboxServer;
  let now = Date.UTC(2027, 0, 1, 12, 0, 10); // 10 s into a minute
  beforeAll(async () => {
    sandbox = await SandboxServer.start({
      redirectUris: ['http://127.0.0.1:9/cb'],
      clock: () => now,
      quotas: { read: { calls: 3, windowSeconds: 60 } },
    });
  });
  afterAll(() => sandbox.close());

  it('counts any interval of the window by default: a call leaves the count a window after it was made', async () => {
    const token = sandbox.issueTokens('dave').access_token;
    const list = () => call(sandbox.url, 'GET', '/workflows', { token });
    const start = now;
    expect((await list()).status).toBe(200); // at 0 s
    now += 40_000;
    expect((await list()).status).toBe(200); // at 40 s
    now += 15_000;
    expect((await list()).status).toBe(200); // at 55 s: the window of the clock would end here, this one does not
    now += 10_000;
    // At 65 s the first call has left the interval: one more fits, the next waits for the call made at 40 s.
    expect((await list()).status).toBe(200);
    const refused = await list();
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '35']);
    now = start + 100_001;
    expect((await list()).status).toBe(200);
    now = start + 120_000;
  });

  it('answers 429 with Retry-After past the limit, counts no refused call, and starts again with the next window (counting clock)', async () => {
    await call(sandbox.url, 'POST', '/_sandbox/quotas', { json: { quotas: { read: { calls: 3, windowSeconds: 60, counting: 'clock' } } } });
    now = Date.UTC(2027, 0, 1, 12, 10, 10); // 10 s into a minute
    const token = sandbox.issueTokens('alice').access_token;
    const list = () => call(sandbox.url, 'GET', '/workflows', { token });
    for (let i = 0; i < 3; i++) expect((await list()).status).toBe(200);
    const refused = await list();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('50');
    expect(refused.body).toMatchObject({ error: 'rate_limited' });
    // Another user of the same company shares its limit; writes have none here.
    expect((await call(sandbox.url, 'GET', '/userinfo', { token: sandbox.issueTokens('bob').access_token })).status).toBe(429);
    expect((await call(sandbox.url, 'POST', '/workflows', { token, json: { name: 'Still allowed' } })).status).toBe(201);
    expect(sandbox.stats().quotaRefusals).toBe(3);
    expect(sandbox.records().filter((r) => r.outcome === 'quota_exhausted')).toHaveLength(3);
    now += 50_000;
    expect((await list()).status).toBe(200);
    await call(sandbox.url, 'POST', '/_sandbox/quotas', { json: { quotas: null } });
  });

  it('sets a company limit over HTTP, checks it, and goes back to the defaults with null', async () => {
    const control = (json: unknown) => call<{ quotas: unknown }>(sandbox.url, 'POST', '/_sandbox/quotas', { json });
    expect((await control({ quotas: { write: { calls: 1, windowSeconds: 1 } } })).body).toEqual({
      companyId: 'company-1',
      quotas: { write: { calls: 1, windowSeconds: 1 } },
    });
    const token = sandbox.issueTokens('carol').access_token;
    const create = () => call(sandbox.url, 'POST', '/workflows', { token, json: { name: 'One a second' } });
    expect((await create()).status).toBe(201);
    const refused = await create();
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '1']);
    for (const bad of [
      { quotas: { read: { calls: 0, windowSeconds: 60 } } },
      { quotas: { read: { calls: 1, windowSeconds: 60, counting: 'calendar' } } },
      { quotas: { delete: null } },
      {},
      { quotas: 'x' },
    ])
      expect((await control(bad)).status).toBe(400);
    expect((await control({ quotas: null })).body).toMatchObject({ quotas: { read: { calls: 3, windowSeconds: 60 } } });
    expect((await call(sandbox.url, 'GET', '/_sandbox/quotas')).body).toEqual({
      companyId: 'company-1',
      quotas: { read: { calls: 3, windowSeconds: 60 } },
    });
  });

  it('refuses a quotas option it cannot read', async () => {
    await expect(
      SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'], quotas: { read: { calls: 1, windowSeconds: 0 } } }),
    ).rejects.toThrow(SandboxConfigError);
  });
});
