// Writes the OpenAPI document the service serves at /docs-json to a file (default dist/openapi.json), for
// the linter and the generated-client test: builds if needed, starts the service on free ports (on
// DATABASE_URL when set, else the embedded default in a scratch DATA_DIR), reads the document, stops it.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = resolve(process.argv[2] ?? join(root, 'dist', 'openapi.json'));

const freePort = () =>
  new Promise((done, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => done(port));
    });
  });

build();
const dataDir = mkdtempSync(join(tmpdir(), 'cws-openapi-'));
const port = await freePort();
const env = { ...process.env, PORT: String(port), SANDBOX_PORT: String(await freePort()), DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOG_FORMAT: 'json' };
const app = spawn(process.execPath, [join(root, 'dist', 'src', 'main.js')], { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
let stderr = '';
app.stderr.on('data', (d) => (stderr += d));
const exited = new Promise((done) => app.once('exit', done));
try {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (app.exitCode !== null) throw new Error(`the service exited before it was ready:\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`the service was not ready in time:\n${stderr}`);
    const ready = await fetch(`http://127.0.0.1:${port}/health/ready`).then((r) => r.status === 200, () => false);
    if (ready) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const document = await (await fetch(`http://127.0.0.1:${port}/docs-json`)).json();
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(document, null, 2) + '\n');
  console.log(`wrote ${out}`);
} finally {
  app.kill('SIGTERM');
  await exited;
  rmSync(dataDir, { recursive: true, force: true });
}
