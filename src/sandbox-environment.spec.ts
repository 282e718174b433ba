import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from './config/app-config.js';
import { sandboxQuotas, withSandboxEnvironment } from './sandbox-environment.js';

const dataDir = mkdtempSync(join(tmpdir(), 'cws-sandbox-env-spec-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('withSandboxEnvironment', () => {
  it('makes the running sandbox the only environment of a default start, with the client it registered', () => {
    const config = loadConfig({ DATA_DIR: dataDir, PORT: '4000' });
    expect(config.sandbox).toMatchObject({ enabled: true, port: 4001 });
    const sandbox = { url: 'http://127.0.0.1:4001', clientId: 'its-client', clientSecret: config.sandbox.clientSecret, scopes: ['a.read'] };
    const c = withSandboxEnvironment(config, sandbox);
    expect(Object.keys(c.environments)).toEqual(['sandbox']);
    expect(c.environments.sandbox).toEqual({
      name: 'sandbox',
      authUrl: sandbox.url,
      apiUrl: sandbox.url,
      clientId: 'its-client',
      clientSecret: config.sandbox.clientSecret,
      scopes: ['a.read'],
      tokenAuth: 'body',
      userinfoMethod: 'GET',
      quotas: {},
      listing: { query: '', items: '', idField: 'id' },
    });
    expect(Object.isFrozen(c.environments.sandbox)).toBe(true);
    expect(c.port).toBe(4000);
  });

  it('gives the sandbox environment CWS_SANDBOX_QUOTAS, and the in-process sandbox the same limits', () => {
    const config = loadConfig({ DATA_DIR: dataDir, PORT: '4000', CWS_SANDBOX_QUOTAS: 'read=400/60s,write=40/1m' });
    const sandbox = { url: 'http://127.0.0.1:4001', clientId: 'its-client', clientSecret: config.sandbox.clientSecret, scopes: ['a.read'] };
    expect(withSandboxEnvironment(config, sandbox).environments.sandbox?.quotas.read?.text).toBe('400/60s');
    expect(sandboxQuotas(config.sandbox.quotas)).toEqual({
      read: { calls: 400, windowSeconds: 60 },
      write: { calls: 40, windowSeconds: 60 },
    });
  });
});
