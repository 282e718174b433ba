import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { NestExpressApplication } from '@nestjs/platform-express';
import pg from 'pg';
import type { AppConfig } from '../../src/config/app-config.js';
import { loadConfig } from '../../src/config/app-config.js';
import type { Clock } from '../../src/common/clock.js';
import { SandboxServer, type SandboxOptions } from 'cws-sandbox';
import { freePort } from '../../src/common/free-port.js';
import { startService } from '../../src/service.js';
import { createTestDatabase, openPool } from './test-database.js';

export interface HttpAnswer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TestApp {
  url: string;
  config: AppConfig;
  app: NestExpressApplication;
  databaseUrl: string;
  /** Every log line the app wrote, raw. */
  logs: string[];
  db: pg.Pool;
  operatorKey: string;
  sandbox: SandboxServer | null;
  request<T = unknown>(
    method: string,
    path: string,
    init?: { key?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<HttpAnswer<T>>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  /** Extra environment variables, on top of a test default (explicit vault key and operator key). */
  env?: Record<string, string>;
  /** Reuse a database (e.g. to restart an app on the same data); a fresh one otherwise. */
  databaseUrl?: string;
  /** Start a sandbox and configure the `sandbox` environment to point at it (default true). */
  sandbox?: boolean | Partial<SandboxOptions>;
  clock?: Clock;
}

export function testVaultKey(kid = 'test1'): string {
  return `${kid}:${randomBytes(32).toString('base64')}`;
}

/** The variables that make `sandbox` an instance's `sandbox` environment (with SANDBOX=off). */
export function sandboxEnv(sandbox: SandboxServer): Record<string, string> {
  return {
    CWS_SANDBOX_AUTH_URL: sandbox.url,
    CWS_SANDBOX_CLIENT_ID: sandbox.clientId,
    CWS_SANDBOX_CLIENT_SECRET: sandbox.clientSecret,
    CWS_SANDBOX_SCOPES: sandbox.scopes.join(' '),
  };
}

/**
 * The environment of an instance spawned as its own process (spawn-app.ts) on `databaseUrl`, with `sandbox`
 * as its upstream and the operator key given; its own DATA_DIR (a new directory named after `name`), warn-level
 * logs, the scheduler ticking every 200 ms. `extra` adds to that or overrides it.
 */
export function spawnedEnv(
  name: string,
  databaseUrl: string,
  sandbox: SandboxServer,
  operatorKey: string,
  extra: Record<string, string>,
): Record<string, string> {
  return {
    DATA_DIR: mkdtempSync(join(tmpdir(), `cws-${name}-`)),
    DATABASE_URL: databaseUrl,
    SANDBOX: 'off',
    ...sandboxEnv(sandbox),
    OPERATOR_API_KEY: operatorKey,
    REFRESH_INTERVAL_MS: '200',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/**
 * Another instance of `first`'s deployment, in this process: the same database, vault keys, operator key and
 * upstream (first's sandbox), on a port of its own. `env` adds to that or overrides it.
 */
export function startSecondInstance(first: TestApp, env: Record<string, string> = {}): Promise<TestApp> {
  const vaultKeys = first.config.vaultKeys.map((k) => `${k.kid}:${k.key.toString('base64')}`).join(',');
  return startTestApp({
    databaseUrl: first.databaseUrl,
    sandbox: false,
    env: {
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: first.operatorKey,
      PORT: '0',
      ...(first.sandbox ? sandboxEnv(first.sandbox) : {}),
      ...env,
    },
  });
}

/** Boots the real app on an ephemeral port, on its own database, with its own sandbox. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const databaseUrl = options.databaseUrl ?? (await createTestDatabase());
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });

  let sandbox: SandboxServer | null = null;
  const ownSandbox: Record<string, string> = {};
  if (options.sandbox !== false) {
    // The sandbox must know the callback's address before the app listens: a port picked now, unless the test
    // names PUBLIC_URL itself (a proxy in front), when the app may take any port.
    const given = options.env?.PUBLIC_URL;
    const port = given ? 0 : await freePort();
    const publicUrl = given ?? `http://127.0.0.1:${port}`;
    const extra = typeof options.sandbox === 'object' ? options.sandbox : {};
    sandbox = await SandboxServer.start({ redirectUris: [`${publicUrl}/oauth/callback`], ...extra });
    Object.assign(ownSandbox, { PORT: String(port), PUBLIC_URL: publicUrl, ...sandboxEnv(sandbox) });
  }
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const config = loadConfig({
    NODE_ENV: 'test',
    DATA_DIR: '/nonexistent-test-data-dir',
    SANDBOX: 'off',
    LOG_LEVEL: 'info',
    VAULT_KEYS: testVaultKey(),
    OPERATOR_API_KEY: operatorKey,
    // An ephemeral port unless the sandbox's redirect URI needs a known one: never the default 3000, which
    // parallel test files (and a developer's own `npm start`) would contend for.
    PORT: '0',
    ...ownSandbox,
    ...options.env,
    DATABASE_URL: databaseUrl,
  });
  // Built as `npm start` builds it; the test database is already migrated (from the template) and the
  // sandbox is the test's own (SANDBOX=off), so only the app and its server start here.
  const service = await startService(config, { logDestination: destination, clock: options.clock, host: '127.0.0.1' }).catch(
    async (e: unknown) => {
      // The service closed what it opened; the test's own sandbox would keep jest from exiting.
      await sandbox?.close();
      throw e;
    },
  );
  const { app, url } = service;
  const db = openPool(databaseUrl);

  return {
    url,
    config,
    app,
    databaseUrl,
    logs,
    db,
    operatorKey: config.operatorApiKey,
    sandbox,
    async request<T>(method: string, path: string, init: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {}) {
      const headers: Record<string, string> = { ...init.headers };
      const key = init.key === undefined ? config.operatorApiKey : init.key;
      if (key) headers.authorization = `Bearer ${key}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(url + path, { method, headers, body, redirect: 'manual' });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        /* not JSON: keep the text */
      }
      return { status: res.status, headers: res.headers, body: parsed as T, text };
    },
    async close() {
      await service.stop();
      await db.end();
      await sandbox?.close();
    },
  };
}
