// Compiles the sandbox package (packages/cws-sandbox, to its own dist/) and src/ and migrations/ to dist/
// with SWC (the Nest CLI's builder for the app) (no type-checking: that is
// `npm run typecheck`), and does nothing when no input changed since the last build. Inputs are
// fingerprinted by path, size and modification time, so an edit, a new or deleted file, a branch switch
// or a dependency update all rebuild. `node tools/build.mjs --force` always builds.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stampFile = join(root, 'dist', '.build-fingerprint');
const SANDBOX = join(root, 'packages', 'cws-sandbox');
const inputs = ['src', 'migrations', 'packages/cws-sandbox/src', 'packages/cws-sandbox/package.json', 'packages/cws-sandbox/.swcrc', 'package.json', 'package-lock.json', 'nest-cli.json', 'tsconfig.json', 'tsconfig.build.json'];

function* files(path) {
  if (!existsSync(path)) return;
  if (!statSync(path).isDirectory()) return yield path;
  for (const entry of readdirSync(path, { withFileTypes: true })) yield* files(join(path, entry.name));
}

function fingerprint() {
  const hash = createHash('sha256');
  for (const input of inputs) {
    for (const file of files(join(root, input))) {
      const { size, mtimeMs } = statSync(file);
      hash.update(`${relative(root, file)}\0${size}\0${mtimeMs}\n`);
    }
  }
  return hash.digest('hex');
}

/** Builds when an input changed (or always, with force); exits the process with the compiler's output if the build fails. */
export function build({ force = false } = {}) {
  const before = fingerprint();
  const mainJs = join(root, 'dist', 'src', 'main.js');
  const sandboxJs = join(SANDBOX, 'dist', 'index.js');
  if (!force && existsSync(mainJs) && existsSync(sandboxJs) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === before) return;

  // Quiet when it works: `npm start` shows the service's banner, not the compiler's progress.
  const swc = join(root, 'node_modules', '@swc', 'cli', 'bin', 'swc.js');
  run([swc, 'src', '-d', 'dist', '--strip-leading-paths', '--config-file', '.swcrc', '--quiet'], SANDBOX, sandboxJs);
  const nest = join(root, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js');
  run([nest, 'build'], root, mainJs);
  writeFileSync(stampFile, before);
}

function run(args, cwd, output) {
  const built = spawnSync(process.execPath, args, { cwd, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(output)) {
    process.stderr.write(`${built.stdout ?? ''}${built.stderr ?? ''}${built.error ? `${built.error.message}\n` : ''}`);
    console.error('cws-connect: the build failed (see above)');
    process.exit(built.status || 1);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) build({ force: process.argv.includes('--force') });
