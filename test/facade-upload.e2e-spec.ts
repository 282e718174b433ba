import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import { authorizeAtSandbox, openCallback } from './support/connect.js';
import { freePort } from '../src/common/free-port.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { sandboxEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';

const GIB = 1024 ** 3;
const CHUNK = 1024 * 1024;
const MIB = 1024 * 1024;

/** VmRSS / VmHWM of a process, in bytes. */
function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/**
 * Streams a multipart body of `size` file bytes, generated on the fly (a random 1 MiB block repeated with a
 * changing counter, so no two chunks are alike), hashing what it sends. Never holds the body in memory.
 */
function uploadMultipart(
  url: string,
  headers: Record<string, string>,
  size: number,
): Promise<{ status: number; text: string; sha256: string }> {
  const boundary = `----cws${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nBig contract\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="contract"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const block = randomBytes(CHUNK);
  const hash = createHash('sha256');
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + size + tail.length),
      },
    });
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        const n = Math.min(CHUNK, size - sent);
        const chunk = Buffer.from(block.subarray(0, n));
        chunk.writeUInt32BE(sent / CHUNK, 0);
        hash.update(chunk);
        sent += n;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end(tail);
    };
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8'), sha256: hash.digest('hex') }),
      );
    });
    req.on('error', reject);
    req.write(head);
    pump();
  });
}

describe('a 1 GiB multipart upload through the facade (app in its own process)', () => {
  let sandbox: SandboxServer;
  let app: SpawnedApp;
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;

  beforeAll(async () => {
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}`;
    sandbox = await SandboxServer.start({ redirectUris: [`${publicUrl}/oauth/callback`], recordLimit: 100 });
    app = await spawnApp({
      PORT: String(port),
      PUBLIC_URL: publicUrl,
      NODE_ENV: 'test',
      DATA_DIR: '/nonexistent-test-data-dir',
      DATABASE_URL: await createTestDatabase(),
      SANDBOX: 'off',
      VAULT_KEYS: testVaultKey(),
      OPERATOR_API_KEY: operatorKey,
      ...sandboxEnv(sandbox),
    });
    const auth = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };
    const tenant = await fetch(`${app.url}/v1/tenants`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ id: 'big', name: 'big', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
    });
    expect(tenant.status).toBe(201);
    const session = await fetch(`${app.url}/v1/tenants/big/connect-sessions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ kind: 'user', userId: 'u-alice', returnUrl: 'http://localhost:5173/done' }),
    });
    const { connectUrl } = (await session.json()) as { connectUrl: string };
    const back = await openCallback(await authorizeAtSandbox(connectUrl, 'alice', 'approve'));
    expect(new URL(back.headers.get('location')!).searchParams.get('status')).toBe('connected');
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await sandbox?.close();
  });

  it('arrives byte-identical while the service grows by less than a tenth of it (the body is never held whole)', async () => {
    const url = `${app.url}/v1/tenants/big/workflows`;
    const headers = { authorization: `Bearer ${operatorKey}`, 'x-user-id': 'u-alice' };
    // Warm up the path (JIT, pools, caches) with a small upload, then measure from a settled state.
    expect((await uploadMultipart(url, headers, 4 * MIB)).status).toBe(201);
    await new Promise((r) => setTimeout(r, 300));
    const before = memoryOf(app.pid);
    writeFileSync(`/proc/${app.pid}/clear_refs`, '5'); // resets VmHWM to the current RSS
    let peak = before.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, memoryOf(app.pid).rss)), 50);
    const started = Date.now();
    let result;
    try {
      result = await uploadMultipart(url, headers, GIB);
    } finally {
      clearInterval(sampler);
    }
    const seconds = (Date.now() - started) / 1000;
    const after = memoryOf(app.pid);
    peak = Math.max(peak, after.hwm);
    const grew = peak - before.rss;
    console.log(
      `1 GiB through the facade in ${seconds.toFixed(1)} s; app RSS ${(before.rss / MIB).toFixed(0)} MiB before, peak ${(peak / MIB).toFixed(0)} MiB (+${(grew / MIB).toFixed(1)} MiB)`,
    );

    expect(result.status).toBe(201);
    const workflow = JSON.parse(result.text) as { creator: { id: string }; documents: Array<{ size: number; sha256: string }> };
    expect(workflow.creator.id).toBe('alice');
    expect(workflow.documents[0]).toMatchObject({ size: GIB, sha256: result.sha256 });
    // Held whole, the body would add 1 GiB; streamed, what grows is the garbage collector's working room, which on
    // Node 24 (V8's larger young generation) is 61-71 MiB (docs/facade.md).
    expect(grew).toBeLessThan(GIB / 10);
  }, 120_000);
});
