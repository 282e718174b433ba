import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SandboxServer } from 'cws-sandbox';
import { authorizeAtSandbox, openCallback } from './support/connect.js';
import { memoryOf, uploadMultipart } from './support/multipart-upload.js';
import { freePort } from '../src/common/free-port.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { sandboxEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';
import { canBoundUploadGarbage } from '../src/upload-garbage.js';

const GIB = 1024 ** 3;
const MIB = 1024 * 1024;

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

  it('arrives byte-identical while the service grows by less than 64 MiB on its runtime (the body is never held whole)', async () => {
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
    // Held whole, the body would add 1 GiB; streamed, what grows is the garbage the chunks leave until V8 collects
    // them, which the service bounds on its runtime (src/upload-garbage.ts: 61-71 MiB on Node 24 without it, about
    // 36 on Node 20). Node 26's V8 offers no such bound: there the margin stays the tenth of the body it was (71 MiB
    // measured), which CI's second runtime still holds.
    expect(grew).toBeLessThan(canBoundUploadGarbage() ? 64 * MIB : GIB / 10);
  }, 120_000);
});
