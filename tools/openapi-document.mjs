// The one way the repository obtains the OpenAPI document the service serves at /docs-json, for the
// linter (`npm run lint:openapi`) and the node client's generator (`npm run client:generate`).
//
//   node tools/openapi-document.mjs [out]                 builds if needed, starts the service on a free port
//                                                         (on DATABASE_URL when set, else the embedded default
//                                                         in a scratch DATA_DIR), reads the document, stops it
//   node tools/openapi-document.mjs --url <base> [out]    reads a running service's document instead
//
// `out` defaults to dist/openapi.json.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const urlFlag = args.indexOf('--url');
const url = urlFlag >= 0 ? (args.splice(urlFlag, 2)[1] ?? '') : undefined;
const out = resolve(args[0] ?? join(root, 'dist', 'openapi.json'));

const freePort = () =>
  new Promise((done, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => done(port));
    });
  });

async function documentAt(base) {
  if (!/^https?:\/\//.test(base)) throw new Error('--url takes the service base address, e.g. http://localhost:3000');
  const res = await fetch(new URL('/docs-json', base)).catch((e) => {
    throw new Error(`cannot reach ${base}/docs-json: ${e.cause?.code ?? e.cause?.message ?? e.message}`);
  });
  if (!res.ok) throw new Error(`${base}/docs-json answered ${res.status}`);
  return res.json();
}

/** The compiled service on its defaults: the document must not depend on whoever runs this. */
async function documentOfFreshService() {
  await build();
  const dataDir = mkdtempSync(join(tmpdir(), 'cws-openapi-'));
  const port = await freePort();
  const env = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'DATABASE_URL']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, {
    NODE_ENV: 'development',
    PORT: String(port),
    DATA_DIR: dataDir,
    SANDBOX: 'off',
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
  });
  const app = spawn(process.execPath, [join(root, 'dist', 'src', 'main.js')], { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  app.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((done) => app.once('exit', done));
  try {
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (app.exitCode !== null) throw new Error(`the service exited before it was ready:\n${stderr}`);
      if (Date.now() > deadline) throw new Error(`the service was not ready in time:\n${stderr}`);
      const ready = await fetch(`${base}/health/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return await documentAt(base);
  } finally {
    app.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

try {
  const document = url === undefined ? await documentOfFreshService() : await documentAt(url);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(document, null, 2) + '\n');
  const shown = relative(process.cwd(), out);
  console.log(`wrote ${shown.startsWith('..') ? out : shown} (${Object.keys(document.paths ?? {}).length} paths)`);
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
