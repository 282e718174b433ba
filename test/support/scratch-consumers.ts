import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Ran {
  stdout: string;
  stderr: string;
  /** The exit code (null when a signal ended it). */
  code: number | null;
}

/** Runs a command to its end, whatever its exit code. */
export function runToEnd(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  return new Promise((resolve, reject) => {
    // Plain output whatever the environment (CI=true makes some tools colour what the tests read).
    const plain = { ...env, NO_COLOR: '1', FORCE_COLOR: '0' };
    execFile(command, args, { cwd, env: plain, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') reject(error);
      else resolve({ stdout, stderr, code: error ? Number(error.code) : 0 });
    });
  });
}

/** Runs a command; rejects with its output when it fails. */
export async function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  const ran = await runToEnd(command, args, cwd, env);
  if (ran.code !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited with ${ran.code}:\n${ran.stdout}\n${ran.stderr}`);
  return ran;
}

/**
 * The environment for npm run outside the workspace: without the npm_* variables an `npm test` run hands down
 * (npm_config_local_prefix would make npm work on the workspace), but with the cache, registry and user config.
 */
export function npmEnv(): NodeJS.ProcessEnv {
  const kept = /^npm_config_(cache|registry|userconfig)$/i;
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) || kept.test(k)));
}

interface LockEntry {
  version: string;
  resolved?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  [field: string]: unknown;
}

/**
 * A package-lock.json for a project outside the workspace that depends on the given tarballs (by file name,
 * beside the project) and on registry packages at the versions the workspace's lockfile holds: their entries
 * are copied from it (same versions, same integrity), so `npm ci --offline` installs them from the npm cache
 * that the workspace's own `npm ci` filled, without asking the registry.
 */
export function writeConsumerProject(dir: string, tarballs: Record<string, string>, registryPackages: string[]): void {
  const workspace = (JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const packages: Record<string, LockEntry> = {};
  const parent = (location: string) => {
    const at = location.lastIndexOf('/node_modules/');
    return at < 0 ? '' : location.slice(0, at);
  };
  // Node's lookup in the workspace's tree, from where the dependent is installed there; flattened here.
  const add = (name: string, from: string) => {
    let location = from;
    for (;;) {
      const candidate = `${location ? `${location}/` : ''}node_modules/${name}`;
      if (workspace[candidate]) {
        location = candidate;
        break;
      }
      if (!location) throw new Error(`${name} is not in the workspace's package-lock.json`);
      location = parent(location);
    }
    const key = `node_modules/${name}`;
    const found = workspace[location];
    if (packages[key]) {
      if (packages[key].version !== found.version) throw new Error(`two versions of ${name} needed: flatten by hand`);
      return;
    }
    const { dev: _dev, peer: _peer, devOptional: _devOptional, ...entry } = found;
    packages[key] = entry;
    for (const dependency of Object.keys(entry.dependencies ?? {})) add(dependency, location);
  };

  const dependencies: Record<string, string> = {};
  for (const [name, file] of Object.entries(tarballs)) {
    const spec = `file:../${file}`;
    const tarball = readFileSync(join(dir, '..', file));
    const manifest = JSON.parse(readFileSync(join(ROOT, 'packages', name.split('/')[1], 'package.json'), 'utf8')) as LockEntry;
    dependencies[name] = spec;
    packages[`node_modules/${name}`] = {
      version: manifest.version,
      resolved: spec,
      integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
      ...(manifest.dependencies ? { dependencies: manifest.dependencies } : {}),
    };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) add(dependency, `packages/${name.split('/')[1]}`);
  }
  for (const name of registryPackages) {
    add(name, '');
    dependencies[name] = packages[`node_modules/${name}`].version;
  }

  const manifest = { name: 'scratch-consumer', version: '1.0.0', private: true, type: 'module', dependencies };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const root = { name: manifest.name, version: manifest.version, dependencies };
  const lock = { name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages: { '': root, ...packages } };
  writeFileSync(join(dir, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);
}

/**
 * Installs a project written by writeConsumerProject: from the npm cache alone; where the cache lacks a
 * package (a machine whose cache was emptied since its `npm ci`), from the registry, preferring the cache.
 */
export async function installConsumer(dir: string): Promise<void> {
  const args = ['ci', '--no-audit', '--no-fund', '--ignore-scripts'];
  try {
    await run('npm', [...args, '--offline'], dir, npmEnv());
  } catch (e) {
    if (!/ENOTCACHED/.test(String(e))) throw e;
    await run('npm', [...args, '--prefer-offline'], dir, npmEnv());
  }
}

/** Writes files under dir (paths relative to it). */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}
