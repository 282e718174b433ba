// Compiles the CWS sandbox package (packages/cws-sandbox, to its own dist/) with SWC, src/ and migrations/
// to dist/ with SWC (tools/swc-service.json: decorators with their metadata, as NestJS needs), and the operator
// console (packages/console) to its static files with Vite (no type-checking: that is `npm run typecheck`); each
// part does nothing when none of its inputs changed since its last build, and the parts that must build run at
// once, each in its own process (a fresh clone builds all three). Inputs are
// fingerprinted by path, size and modification time, so an edit, a new or deleted file, a branch switch
// or a dependency update all rebuild. `node tools/build.mjs --force` always builds.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const sandbox = {
  inputs: ['packages/cws-sandbox/src', 'packages/cws-sandbox/package.json', 'packages/cws-sandbox/.swcrc', 'package-lock.json'],
  output: join(root, 'packages', 'cws-sandbox', 'dist', 'index.js'),
  stamp: join(root, 'packages', 'cws-sandbox', 'dist', '.build-fingerprint'),
  command: [
    join(root, 'node_modules', '@swc', 'cli', 'bin', 'swc.js'),
    'src',
    '-d',
    'dist',
    '--strip-leading-paths',
    '--config-file',
    '.swcrc',
    '--quiet',
  ],
  cwd: join(root, 'packages', 'cws-sandbox'),
};
// SWC's own command line, not the Nest CLI's builder, which loads the TypeScript compiler only to read tsconfig.json
// (about 1 s of CPU per build, more than the compilation): the same options, the same output file for file.
const service = {
  inputs: ['src', 'migrations', 'package.json', 'package-lock.json', 'tools/swc-service.json'],
  output: join(root, 'dist', 'src', 'main.js'),
  stamp: join(root, 'dist', '.build-fingerprint'),
  clean: join(root, 'dist'),
  command: [
    join(root, 'node_modules', '@swc', 'cli', 'bin', 'swc.js'),
    'src',
    'migrations',
    '-d',
    'dist',
    '--config-file',
    'tools/swc-service.json',
    '--no-swcrc',
    '--ignore',
    '**/*.spec.ts,**/*.e2e-spec.ts',
    '--quiet',
  ],
};
const consolePage = {
  inputs: [
    'packages/console/src',
    'packages/console/index.html',
    'packages/console/vite.config.ts',
    'packages/console/package.json',
    'package-lock.json',
  ],
  output: join(root, 'packages', 'console', 'dist', 'index.html'),
  stamp: join(root, 'packages', 'console', 'dist', '.build-fingerprint'),
  command: [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', join(root, 'packages', 'console')],
};

function* files(path) {
  if (!existsSync(path)) return;
  if (!statSync(path).isDirectory()) return yield path;
  for (const entry of readdirSync(path, { withFileTypes: true })) yield* files(join(path, entry.name));
}

function fingerprint(inputs) {
  const hash = createHash('sha256');
  for (const input of inputs) {
    for (const file of files(join(root, input))) {
      const { size, mtimeMs } = statSync(file);
      hash.update(`${relative(root, file)}\0${size}\0${mtimeMs}\n`);
    }
  }
  return hash.digest('hex');
}

/** Builds each part whose inputs changed (or all, with force), at once; exits the process with the compiler's output if a build fails. */
export async function build({ force = false } = {}) {
  const failed = (await Promise.all([sandbox, service, consolePage].map((part) => buildPart(part, force)))).filter(Boolean);
  if (failed.length) {
    for (const output of failed) process.stderr.write(output);
    console.error('cws-connect: the build failed (see above)');
    process.exit(1);
  }
  writeBuildInfo();
}

/**
 * dist/build-info.json: the commit this build came from, shown by GET /health/live and the start-up banner
 * (src/telemetry/build-info.ts). CWS_BUILD_COMMIT when the packaging sets it, else the checkout's HEAD when this
 * directory is a git checkout of its own, else `unknown` (an unpacked tarball). Written at every run: a new
 * commit that changed no source still changes the commit shown.
 */
function writeBuildInfo() {
  let commit = process.env.CWS_BUILD_COMMIT?.trim() || 'unknown';
  if (commit === 'unknown') {
    const git = (...args) => spawnSync('git', args, { cwd: root, encoding: 'utf8' });
    const top = git('rev-parse', '--show-toplevel');
    if (top.status === 0 && relative(top.stdout.trim(), root) === '') {
      const head = git('rev-parse', 'HEAD');
      if (head.status === 0) commit = head.stdout.trim();
    }
  }
  const file = join(root, 'dist', 'build-info.json');
  const text = `${JSON.stringify({ commit })}\n`;
  if (!existsSync(file) || readFileSync(file, 'utf8') !== text) writeFileSync(file, text);
}

/** Resolves with null when the part is built (or needed no build), else with what its compiler printed. */
async function buildPart({ inputs, output, stamp, clean, command, cwd = root }, force) {
  const before = fingerprint(inputs);
  if (!force && existsSync(output) && existsSync(stamp) && readFileSync(stamp, 'utf8') === before) return null;
  if (clean) rmSync(clean, { recursive: true, force: true }); // no output of a deleted source survives
  // Quiet when it works: `npm start` shows the service's banner, not the compiler's progress.
  const child = spawn(process.execPath, command, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let printed = '';
  child.stdout.on('data', (d) => (printed += d));
  child.stderr.on('data', (d) => (printed += d));
  const status = await new Promise((resolve) => {
    child.once('error', (e) => {
      printed += `${e.message}\n`;
      resolve(1);
    });
    child.once('close', (code) => resolve(code));
  });
  if (status !== 0 || !existsSync(output)) return printed || `${command[0]} exited with ${status}\n`;
  writeFileSync(stamp, before);
  return null;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await build({ force: process.argv.includes('--force') });
