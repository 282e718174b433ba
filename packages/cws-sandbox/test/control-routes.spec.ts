import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from '../src/sandbox-server.js';
import { call, tokenRequest } from './helpers.js';

describe('/_sandbox/ control over HTTP', () => {
  let sandbox: SandboxServer;
  const control = <T = unknown>(method: string, path: string, json?: unknown) =>
    call<T>(sandbox.url, method, `/_sandbox/${path}`, json === undefined ? {} : { json });
  beforeAll(async () => {
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'] });
  });
  afterAll(() => sandbox.close());

  it('issues tokens, expires and revokes them', async () => {
    const issued = await control<{ access_token: string; refresh_token: string; scope: string[]; expiresIn: number; family: string }>(
      'POST',
      'tokens',
      {
        userId: 'bob',
        scopes: ['workflows.read'],
      },
    );
    expect(issued.status).toBe(200);
    expect(issued.body).toMatchObject({ scope: ['workflows.read'], expiresIn: 21600, family: expect.stringMatching(/^fam_/) });
    const list = () => call(sandbox.url, 'GET', '/workflows', { token: issued.body.access_token });
    expect((await list()).status).toBe(200);
    expect((await control('POST', 'expire', { userId: 'bob' })).body).toEqual({ expired: 1 });
    expect((await list()).status).toBe(401);
    const refreshed = await tokenRequest(sandbox, {
      grant_type: 'refresh_token',
      refresh_token: issued.body.refresh_token,
      client_id: sandbox.clientId,
      client_secret: sandbox.clientSecret,
    });
    expect(refreshed.status).toBe(200);
    expect((await control('POST', 'revoke', { userId: 'bob' })).body).toEqual({ revoked: 1 });
    expect((await call(sandbox.url, 'GET', '/workflows', { token: refreshed.body.access_token })).status).toBe(401);
    expect((await control('POST', 'tokens', { userId: 'nobody' })).status).toBe(400);
    expect((await control('POST', 'tokens', { userId: 'bob', scopes: ['admin.all'] })).status).toBe(400);
    const log = await control<Array<{ userId: string }>>('GET', 'refresh-log');
    expect(log.body.map((e) => e.userId)).toEqual(['bob']);
  });

  it('counts the refresh calls of one family: a rotated-away refresh token is refused with 400 invalid_grant', async () => {
    const issued = sandbox.issueTokens('carol');
    const refresh = (refreshToken: string) =>
      tokenRequest(sandbox, {
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: sandbox.clientId,
        client_secret: sandbox.clientSecret,
      });
    const calls = (family: string) =>
      control<{ family: string; granted: number; refused: number }>('GET', `refresh-calls?family=${family}`);
    expect((await calls(issued.family)).body).toEqual({ family: issued.family, granted: 0, refused: 0 });
    expect((await refresh(issued.refresh_token)).status).toBe(200);
    // The old refresh token again, as a database restored from before that renewal would send it.
    const spent = await refresh(issued.refresh_token);
    expect([spent.status, spent.body.error]).toEqual([400, 'invalid_grant']);
    expect((await refresh(issued.refresh_token)).status).toBe(400);
    expect((await calls(issued.family)).body).toEqual({ family: issued.family, granted: 1, refused: 2 });
    expect(sandbox.refreshCalls(issued.family)).toEqual({ family: issued.family, granted: 1, refused: 2 });
    // Another family's calls are its own; an unknown refresh token belongs to no family.
    expect((await refresh('unknown')).status).toBe(400);
    expect((await calls(sandbox.issueTokens('carol').family)).body).toMatchObject({ granted: 0, refused: 0 });
    expect((await control('GET', 'refresh-calls')).status).toBe(400);
  });

  it('moves workflows (new lastModified, same version) and sets attributes (new version and lastModified)', async () => {
    type Wf = { step: string; versionNumber: number; lastModified: string; Author: { type: string }; attributes: Record<string, unknown> };
    const token = sandbox.issueTokens('alice').access_token;
    const wf = await call<Wf & { id: string }>(sandbox.url, 'POST', '/workflows', { token, json: { name: 'Controlled' } });
    const moved = await control<Wf>('POST', `workflows/${wf.body.id}/step`, { step: 'Sign' });
    expect(moved.body).toMatchObject({ step: 'Sign', versionNumber: 1, Author: { type: 'system' } });
    expect(moved.body.lastModified > wf.body.lastModified).toBe(true);
    const same = await control<Wf>('POST', `workflows/${wf.body.id}/step`, { step: 'Sign' });
    expect([same.body.versionNumber, same.body.lastModified]).toEqual([1, moved.body.lastModified]);
    const attr = await control<Wf>('POST', `workflows/${wf.body.id}/attributes`, { name: '__proto__', value: null });
    expect(attr.body.versionNumber).toBe(2);
    expect(attr.body.lastModified > moved.body.lastModified).toBe(true);
    expect(Object.keys(attr.body.attributes)).toEqual(['__proto__']);
    expect((await control('POST', `workflows/${wf.body.id}/step`, { step: 'Done' })).status).toBe(400);
    expect((await control('POST', 'workflows/wf_missing/step', { step: 'Sign' })).status).toBe(404);
    expect(() => sandbox.setWorkflowStep('wf_missing', 'Sign')).toThrow();
  });

  it('reads and clears the records and the stats; control calls are not recorded', async () => {
    await call(sandbox.url, 'GET', '/workflows');
    const records = await control<Array<{ path: string; status: number }>>('GET', 'records');
    expect(records.body.at(-1)).toMatchObject({ path: '/workflows', status: 401 });
    expect(records.body.some((r) => r.path.startsWith('/_sandbox'))).toBe(false);
    const stats = await control<{ resourceCalls: number }>('GET', 'stats');
    expect(stats.body.resourceCalls).toBeGreaterThan(0);
    expect((await control('DELETE', 'records')).status).toBe(204);
    expect((await control('GET', 'records')).body).toEqual([]);
    expect((await control<{ resourceCalls: number }>('GET', 'stats')).body.resourceCalls).toBe(stats.body.resourceCalls);
    expect((await control('GET', 'users')).body).toHaveLength(5);
    expect((await control('GET', 'nothing')).status).toBe(404);
  });
});

describe('recordLimit', () => {
  it('keeps the last N records; 0 keeps none but still counts', async () => {
    const small = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'], recordLimit: 3 });
    const none = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/cb'], recordLimit: 0 });
    try {
      for (const sandbox of [small, none]) {
        for (let i = 0; i < 5; i++) await call(sandbox.url, 'GET', `/workflows?i=${i}`);
      }
      expect(small.records().map((r) => r.query)).toEqual(['i=2', 'i=3', 'i=4']);
      expect(none.records()).toEqual([]);
      expect(none.stats().resourceCalls).toBe(5);
    } finally {
      await small.close();
      await none.close();
    }
  });

  it('refuses options that break the spec', async () => {
    await expect(SandboxServer.start({ redirectUris: [] })).rejects.toThrow(/redirectUris/);
    await expect(SandboxServer.start({ redirectUris: ['/relative'] })).rejects.toThrow(/redirectUris/);
    await expect(SandboxServer.start({ redirectUris: ['http://x/cb#frag'] })).rejects.toThrow(/fragment/);
    await expect(SandboxServer.start({ redirectUris: ['http://x/cb'], scopes: ['nodots'] })).rejects.toThrow(/scopes/);
    await expect(SandboxServer.start({ redirectUris: ['http://x/cb'], clientId: 'a:b' })).rejects.toThrow(/clientId/);
  });
});
