import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, sep } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { launchChromium } from './support/chromium.js';
import { newTenant } from './support/connect.js';
import { installConsumer, npmEnv, ROOT, run, runToEnd, writeConsumerProject, writeFiles } from './support/scratch-consumers.js';
import { projectFiles } from './support/scratch-projects.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const PACKAGES = { '@cws-connect/node-client': 'node-client', '@cws-connect/connect-browser': 'connect-browser' } as const;
type PackageName = keyof typeof PACKAGES;
const bin = (path: string) => join(ROOT, 'node_modules', path);
const tsc = bin('typescript/bin/tsc');

/** Serves a directory's files (the bundled page) on an origin of its own; `/` is its index.html. */
async function serveDirectory(dir: string): Promise<{ url: string; close(): Promise<void> }> {
  const types: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const file = join(dir, path === '/' ? 'index.html' : path);
    if (!file.startsWith(dir + sep) || !existsSync(file) || !statSync(file).isFile()) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * The two packages as a partner gets them: `npm pack` (which builds node-client), publint and
 * arethetypeswrong on the tarballs, then installed from the tarballs into projects outside the repository (ESM
 * TypeScript with node16 and with bundler resolution, CommonJS, a page bundled by Vite) that connect a user
 * through the running service in Chromium and verify the signed event it sends.
 */
describe('the packed packages, installed outside the repository', () => {
  let scratch: string;
  let app: string;
  const tarballs = {} as Record<PackageName, string>;
  let t: TestApp;
  let sink: WebhookSink;
  let page: Awaited<ReturnType<typeof serveDirectory>>;
  let browser: Browser;
  let programEnv: NodeJS.ProcessEnv;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'cws-packages-'));
    app = join(scratch, 'app');
    await Promise.all(
      Object.entries(PACKAGES).map(async ([name, dir]) => {
        await run('npm', ['pack', '--pack-destination', scratch], join(ROOT, 'packages', dir), npmEnv());
        tarballs[name as PackageName] = readdirSync(scratch).find((f) => f.startsWith(`cws-connect-${dir}-`) && f.endsWith('.tgz'))!;
      }),
    );
    writeConsumerProject(app, tarballs, ['@types/node']);
    await installConsumer(app);
    writeFiles(app, projectFiles);
    // The ESM program is compiled (and so type-checked) by the repository's tsc; the page is bundled by Vite.
    await Promise.all([
      run(process.execPath, [tsc, '-p', 'node16'], app),
      run(process.execPath, [bin('vite/bin/vite.js'), 'build', 'bundler', '--logLevel', 'warn'], app),
    ]);

    t = await startTestApp({ env: { EVENTS_POLL_INTERVAL_MS: '500', EVENTS_RELAY_INTERVAL_MS: '200' } });
    sink = await WebhookSink.start();
    page = await serveDirectory(join(app, 'bundler', 'dist'));
    await newTenant(t, 'pack-co', { allowedReturnUrls: [page.url], eventsTargetUrl: sink.url });
    const secret = await t.request<{ eventsSecret: string }>('POST', '/v1/tenants/pack-co/events-secret');
    const key = await t.request<{ key: string }>('POST', '/v1/tenants/pack-co/api-keys', { body: { name: 'packed' } });
    programEnv = {
      PATH: process.env.PATH,
      CWS_URL: t.url,
      CWS_KEY: key.body.key,
      CWS_TENANT: 'pack-co',
      CWS_EVENTS_SECRET: secret.body.eventsSecret,
      CWS_USER: 'pack-alice',
      RETURN_URL: page.url,
      EVENT_FILE: join(scratch, 'event.json'),
    };
    browser = await launchChromium();
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await page?.close();
    await sink?.close();
    await t?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('ships only its built files, README and manifest', async () => {
    const listed = async (name: PackageName) =>
      (await run('tar', ['-tzf', join(scratch, tarballs[name])], scratch)).stdout.split('\n').filter(Boolean).sort();
    expect(await listed('@cws-connect/node-client')).toEqual(
      ['cjs', 'esm']
        .flatMap((f) => ['events', 'generated/openapi', 'index'].flatMap((m) => [`${f}/${m}.d.ts`, `${f}/${m}.js`]))
        .concat('cjs/package.json')
        .map((f) => `package/dist/${f}`)
        .concat('package/README.md', 'package/package.json')
        .sort(),
    );
    expect(await listed('@cws-connect/connect-browser')).toEqual(
      ['connect-browser.d.ts', 'connect-browser.js', 'dist/connect-browser.cjs', 'dist/connect-browser.d.cts', 'README.md', 'package.json']
        .map((f) => `package/${f}`)
        .sort(),
    );
    // What npm installed is the tarball's content, not a link into this repository.
    for (const name of Object.keys(PACKAGES)) {
      expect(realpathSync(join(app, 'node_modules', name))).toBe(join(realpathSync(app), 'node_modules', name));
    }
  });

  it('publint reports nothing on either tarball', async () => {
    for (const name of Object.keys(PACKAGES) as PackageName[]) {
      const { stdout } = await run(process.execPath, [bin('publint/src/cli.js'), 'run', join(scratch, tarballs[name])], scratch);
      expect(stdout.trim().split('\n').at(-1)).toBe('All good!');
    }
  });

  it('arethetypeswrong reports nothing on either tarball, under node10, node16 (from ESM and CommonJS) and bundler resolution', async () => {
    for (const name of Object.keys(PACKAGES) as PackageName[]) {
      // Exits 1 when it finds a problem; the JSON lists them.
      const { stdout, code } = await runToEnd(
        process.execPath,
        [bin('@arethetypeswrong/cli/dist/index.js'), join(scratch, tarballs[name]), '--no-definitely-typed', '--format', 'json'],
        scratch,
      );
      const { analysis } = JSON.parse(stdout) as { analysis: { problems: unknown[]; entrypoints: Record<string, unknown> } };
      expect({ name, problems: analysis.problems, code }).toEqual({ name, problems: [], code: 0 });
      expect(Object.keys(analysis.entrypoints)).toEqual(['.', './package.json']);
    }
  });

  it("type-checks the CommonJS program and the bundler project with the repository's tsc", async () => {
    await Promise.all([run(process.execPath, [tsc, '-p', 'cjs'], app), run(process.execPath, [tsc, '-p', 'bundler'], app)]);
  });

  it('connects through the bundled page in Chromium, then reads the connection and verifies its event from ESM and CommonJS', async () => {
    const program = async (flavour: 'node16' | 'cjs', ...args: string[]) => {
      const main = flavour === 'node16' ? join(app, 'node16', 'out', 'main.js') : join(app, 'cjs', 'main.js');
      const { stdout } = await run(process.execPath, [main, ...args], app, programEnv);
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const { connectUrl } = (await program('node16', 'session')) as { connectUrl: string };
    expect(connectUrl).toMatch(new RegExp(`^${t.url}/connect/`));

    const tab = await browser.newPage();
    await tab.goto(`${page.url}?connectUrl=${encodeURIComponent(connectUrl)}`);
    await tab.locator('#connect:not([disabled])').waitFor();
    const [popup] = await Promise.all([tab.waitForEvent('popup'), tab.click('#connect')]);
    await popup.getByLabel(/Alice/).check();
    await popup.getByRole('button', { name: 'Approve' }).click();
    await tab.locator('#result:not(:empty)').waitFor({ timeout: 20_000 });
    const shown = JSON.parse((await tab.locator('#result').textContent()) ?? '{}') as { status?: string; connectionId?: string };
    expect(shown).toEqual({ status: 'connected', connectionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const connectionId = shown.connectionId!;

    const delivery = await waitUntil('the connection.created delivery', () =>
      sink.accepted().find((d) => (d.body.data as { connectionId?: string }).connectionId === connectionId),
    );
    writeFileSync(programEnv.EVENT_FILE!, JSON.stringify({ headers: delivery.headers, raw: delivery.raw }));
    const expected = {
      connection: expect.objectContaining({
        id: connectionId,
        userId: 'pack-alice',
        kind: 'user',
        upstreamUser: expect.objectContaining({ id: 'alice' }),
      }),
      event: {
        source: 'service',
        id: delivery.headers['webhook-id'],
        type: 'connection.created',
        timestamp: expect.any(String),
        data: {
          type: 'connection.created',
          connectionId,
          tenantId: 'pack-co',
          kind: 'user',
          userId: 'pack-alice',
          upstreamUserId: 'alice',
        },
      },
      forged: 'EventVerificationError',
    };
    expect(await program('node16', 'check', connectionId)).toEqual(expected);
    expect(await program('cjs', 'check', connectionId)).toEqual(expected);
    expect(await program('cjs', 'returned')).toEqual({ name: 'CwsConnectError', code: 'access_denied' });
  });
});
