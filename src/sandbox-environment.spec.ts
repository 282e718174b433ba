import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from './config/app-config.js';
import { withSandboxEnvironment } from './sandbox-environment.js';

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
    });
    expect(Object.isFrozen(c.environments.sandbox)).toBe(true);
    expect(c.port).toBe(4000);
  });
});
