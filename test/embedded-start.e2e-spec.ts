import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/common/free-port.js';
import { spawnApp, waitForOutput, type SpawnedApp } from './support/spawn-app.js';

/**
 * The README's default, proven: no DATABASE_URL, no keys, no upstream configured. The service starts an
 * embedded PostgreSQL under DATA_DIR and the sandbox, prints the operator key, stops both on a signal, and
 * finds its data again on the next start, also after a SIGKILL left an orphaned PostgreSQL behind.
 */
describe('npm start on the embedded default', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'cws-connect-embedded-'));
  let running: SpawnedApp | null = null;

  afterAll(async () => {
    await running?.stop('SIGINT');
    rmSync(dataDir, { recursive: true, force: true });
  });

  const env = async () => ({
    DATABASE_URL: undefined,
    OPERATOR_API_KEY: undefined,
    VAULT_KEYS: undefined,
    NODE_ENV: 'development',
    DATA_DIR: dataDir,
    SANDBOX_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  });

  const operatorKeyOf = async (app: SpawnedApp) => (await waitForOutput(app, /operator key:\s+(cwsop_[A-Za-z0-9_-]+)/))[1];

  const postgresPort = () => (JSON.parse(readFileSync(join(dataDir, 'postgres.json'), 'utf8')) as { port: number }).port;
  const accepts = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });

  it('starts, prints the operator key, serves, stops its PostgreSQL on SIGINT and finds its data again', async () => {
    let t0 = Date.now();
    running = await spawnApp(await env(), { readyTimeoutMs: 60_000 });
    const firstStartMs = Date.now() - t0;
    const key = await operatorKeyOf(running);
    expect(key).toBeDefined();
    expect(running.output.join('')).toContain('cws-connect is ready on');

    const created = await fetch(`${running.url}/v1/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'persisted', name: 'Persisted', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
    });
    expect(created.status).toBe(201);

    const port = postgresPort();
    expect(await accepts(port)).toBe(true);
    expect(await running.stop('SIGINT')).toBe(0);
    running = null;
    expect(await accepts(port)).toBe(false);

    t0 = Date.now();
    running = await spawnApp(await env(), { readyTimeoutMs: 60_000 });
    const restartMs = Date.now() - t0;
    expect(await operatorKeyOf(running)).toBe(key);
    const again = await fetch(`${running.url}/v1/tenants/persisted`, { headers: { authorization: `Bearer ${key}` } });
    expect(again.status).toBe(200);

    // An unclean stop: the app dies, its PostgreSQL lives on as an orphan holding postmaster.pid.
    await running.stop('SIGKILL');
    running = null;
    expect(await accepts(postgresPort())).toBe(true);
    t0 = Date.now();
    running = await spawnApp(await env(), { readyTimeoutMs: 60_000 });
    const recoveryMs = Date.now() - t0;
    const afterKill = await fetch(`${running.url}/v1/tenants/persisted`, { headers: { authorization: `Bearer ${key}` } });
    expect(afterKill.status).toBe(200);
    expect(await running.stop('SIGTERM')).toBe(0);
    running = null;
    console.log(`embedded default: first start ${firstStartMs} ms, restart ${restartMs} ms, restart after SIGKILL ${recoveryMs} ms (to /health/ready 200)`);
  }, 180_000);
});
