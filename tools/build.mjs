// Compiles the CWS sandbox package (packages/cws-sandbox, to its own dist/) with SWC, src/ and migrations/
// to dist/ with the Nest CLI's SWC builder, and the operator console
// (packages/console) to its static files with Vite (no type-checking: that is `npm run typecheck`); each
// part does nothing when none of its inputs changed since its last build. Inputs are
// fingerprinted by path, size and modification time, so an edit, a new or deleted file, a branch switch
// or a dependency update all rebuild. `node tools/build.mjs --force` always builds.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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
const service = {
  inputs: ['src', 'migrations', 'package.json', 'package-lock.json', 'nest-cli.json', 'tsconfig.json', 'tsconfig.build.json'],
  output: join(root, 'dist', 'src', 'main.js'),
  stamp: join(root, 'dist', '.build-fingerprint'),
  command: [join(root, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js'), 'build'],
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

/** Builds each part whose inputs changed (or all, with force); exits the process with the compiler's output if a build fails. */
export function build({ force = false } = {}) {
  for (const part of [sandbox, service, consolePage]) buildPart(part, force);
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

function buildPart({ inputs, output, stamp, command, cwd = root }, force) {
  const before = fingerprint(inputs);
  if (!force && existsSync(output) && existsSync(stamp) && readFileSync(stamp, 'utf8') === before) return;
  // Quiet when it works: `npm start` shows the service's banner, not the compiler's progress.
  const built = spawnSync(process.execPath, command, { cwd, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(output)) {
    process.stderr.write(`${built.stdout ?? ''}${built.stderr ?? ''}${built.error ? `${built.error.message}\n` : ''}`);
    console.error('cws-connect: the build failed (see above)');
    process.exit(built.status || 1);
  }
  writeFileSync(stamp, before);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) build({ force: process.argv.includes('--force') });
