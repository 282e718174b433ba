import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { NestExpressApplication } from '@nestjs/platform-express';
import pg from 'pg';
import type { AppConfig } from '../../src/config/app-config.js';
import { loadConfig } from '../../src/config/app-config.js';
import { createApp } from '../../src/app.factory.js';
import type { Clock } from '../../src/common/clock.js';
import { SandboxServer, type SandboxOptions } from '../../src/sandbox/sandbox-server.js';
import { freePort } from '../../src/common/free-port.js';
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
  request<T = unknown>(method: string, path: string, init?: { key?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<HttpAnswer<T>>;
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
  const sandboxEnv: Record<string, string> = {};
  if (options.sandbox !== false) {
    const port = await freePort();
    const publicUrl = options.env?.PUBLIC_URL ?? `http://127.0.0.1:${port}`;
    const extra = typeof options.sandbox === 'object' ? options.sandbox : {};
    sandbox = await SandboxServer.start({ redirectUris: [`${publicUrl}/oauth/callback`], ...extra });
    Object.assign(sandboxEnv, {
      PORT: String(port),
      PUBLIC_URL: publicUrl,
      CWS_SANDBOX_AUTH_URL: sandbox.url,
      CWS_SANDBOX_CLIENT_ID: sandbox.clientId,
      CWS_SANDBOX_CLIENT_SECRET: sandbox.clientSecret,
      CWS_SANDBOX_SCOPES: sandbox.scopes.join(' '),
    });
  }
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const config = loadConfig({
    NODE_ENV: 'test',
    DATA_DIR: '/nonexistent-test-data-dir',
    SANDBOX: 'off',
    LOG_LEVEL: 'info',
    VAULT_KEYS: testVaultKey(),
    OPERATOR_API_KEY: operatorKey,
    ...sandboxEnv,
    ...options.env,
    DATABASE_URL: databaseUrl,
  });
  const app = await createApp(config, { logDestination: destination, clock: options.clock });
  await app.listen(config.port, '127.0.0.1');
  const address = app.getHttpServer().address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : config.port}`;
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
      await app.close();
      await db.end();
      await sandbox?.close();
    },
  };
}
