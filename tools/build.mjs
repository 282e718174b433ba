// Compiles src/ and migrations/ to dist/ with the Nest CLI's SWC builder (no type-checking: that is
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
const inputs = ['src', 'migrations', 'package.json', 'package-lock.json', 'nest-cli.json', 'tsconfig.json', 'tsconfig.build.json'];

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
  if (!force && existsSync(mainJs) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === before) return;

  const nest = join(root, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js');
  // Quiet when it works: `npm start` shows the service's banner, not the compiler's progress.
  const built = spawnSync(process.execPath, [nest, 'build'], { cwd: root, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(mainJs)) {
    process.stderr.write(`${built.stdout ?? ''}${built.stderr ?? ''}${built.error ? `${built.error.message}\n` : ''}`);
    console.error('cws-connect: the build failed (see above)');
    process.exit(built.status || 1);
  }
  writeFileSync(stampFile, before);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) build({ force: process.argv.includes('--force') });
