/**
 * Rewrites src/generated/openapi.ts from the service's live OpenAPI document.
 *
 *   npm run client:generate                       builds the service, starts it on a throw-away embedded
 *                                                 database, reads /docs-json, stops it
 *   npm run client:generate -- --url http://localhost:3000   reads a running service's /docs-json instead
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATED_TYPES_FILE, typesFromDocument } from './openapi-types.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

async function main(): Promise<void> {
  const urlFlag = process.argv.indexOf('--url');
  const document = urlFlag > 0 ? await fetchDocument(process.argv[urlFlag + 1] ?? '') : await documentOfFreshService();
  const file = fileURLToPath(GENERATED_TYPES_FILE);
  writeFileSync(file, await typesFromDocument(document));
  console.log(`wrote ${relative(process.cwd(), file)} (${Object.keys((document as { paths?: object }).paths ?? {}).length} paths)`);
}

async function fetchDocument(base: string): Promise<object> {
  if (!/^https?:\/\//.test(base)) throw new Error('--url takes the service base address, e.g. http://localhost:3000');
  const res = await fetch(new URL('/docs-json', base));
  if (!res.ok) throw new Error(`${base}/docs-json answered ${res.status}`);
  return (await res.json()) as object;
}

/** The compiled service (decorator metadata needs tsc, not tsx) on a temporary embedded PostgreSQL. */
async function documentOfFreshService(): Promise<object> {
  const build = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('the service does not compile (npm run build)');
  const dataDir = mkdtempSync(join(tmpdir(), 'cws-connect-openapi-'));
  const port = await freePort();
  const env: Record<string, string> = {};
  // Only what the service needs to start on its embedded default; no configured environment or database.
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, { NODE_ENV: 'development', PORT: String(port), DATA_DIR: dataDir, SANDBOX: 'off', LOG_LEVEL: 'warn' });
  const proc = spawn(process.execPath, [join(ROOT, 'dist/src/main.js')], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  try {
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`the service exited before it was ready:\n${stderr}`);
      const ready = await fetch(`${base}/health/ready`).then((r) => r.ok, () => false);
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`the service was not ready within 60 s:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return await fetchDocument(base);
  } finally {
    proc.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
