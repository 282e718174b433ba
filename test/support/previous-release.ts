import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './spawn-app.js';

export interface BuiltRelease {
  version: string;
  commit: string;
  /** Where it was unpacked and built; `node <dir>/dist/src/main.js` runs it. */
  dir: string;
  mainJs: string;
}

interface Previous {
  version: string;
  commit: string | null;
}

/**
 * The previous release (tools/previous-release.mjs: its v* tag, else the commit CHANGELOG.md names), unpacked from
 * git history into a directory of its own and built, once per machine and commit. Its dependencies are this
 * checkout's node_modules (a symlink) when its package-lock.json is identical, else its own `npm ci --prefer-offline`.
 */
export async function buildPreviousRelease(): Promise<BuiltRelease> {
  const { previousRelease } = (await import(pathToFileURL(resolve(ROOT, 'tools/previous-release.mjs')).href)) as {
    previousRelease(root: string): Previous | null;
  };
  const previous = previousRelease(ROOT);
  if (!previous?.commit) throw new Error('no previous release whose commit this clone has (git fetch --unshallow?)');
  const { version, commit } = previous;
  const dir = join(tmpdir(), `cws-connect-release-${version}-${commit.slice(0, 12)}`);
  const mainJs = join(dir, 'dist', 'src', 'main.js');
  if (usable(dir)) return { version, commit, dir, mainJs };

  const staging = mkdtempSync(join(tmpdir(), 'cws-connect-release-build-'));
  try {
    const unpack = spawnSync('bash', ['-c', `set -o pipefail; git archive --format=tar ${commit} | tar -x -C "${staging}"`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    if (unpack.status !== 0) throw new Error(`git archive ${commit} failed: ${unpack.stderr}`);
    const sameLock = readFileSync(join(staging, 'package-lock.json'), 'utf8') === readFileSync(join(ROOT, 'package-lock.json'), 'utf8');
    if (sameLock) symlinkSync(join(ROOT, 'node_modules'), join(staging, 'node_modules'), 'dir');
    else run(staging, 'npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund']);
    // With shared node_modules the workspace packages resolve to this checkout's (built by the e2e setup): only the service is built.
    if (sameLock) run(staging, process.execPath, [join(staging, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js'), 'build']);
    else run(staging, process.execPath, [join(staging, 'tools', 'build.mjs'), '--force']);
    if (!existsSync(join(staging, 'dist', 'src', 'main.js'))) throw new Error('the previous release built no dist/src/main.js');
    writeFileSync(join(staging, '.built'), `${commit}\n`);
    rmSync(dir, { recursive: true, force: true }); // an unfinished one
    try {
      renameSync(staging, dir);
    } catch (e) {
      // Another run built it meanwhile.
      if (!usable(dir)) throw e;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return { version, commit, dir, mainJs };
}

/**
 * A build made before is reused only when its dependencies still resolve: its own node_modules, or a link to
 * this checkout's (a build linked to another checkout, perhaps deleted since, is built again).
 */
function usable(dir: string): boolean {
  if (!existsSync(join(dir, '.built'))) return false;
  const modules = join(dir, 'node_modules');
  const entry = lstatSync(modules, { throwIfNoEntry: false });
  if (!entry) return false;
  if (entry.isSymbolicLink()) return readlinkSync(modules) === join(ROOT, 'node_modules');
  return existsSync(join(modules, 'reflect-metadata', 'package.json'));
}

function run(cwd: string, file: string, args: string[]): void {
  const r = spawnSync(file, args, { cwd, encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} failed in ${cwd}:\n${r.stdout}\n${r.stderr}`);
}
