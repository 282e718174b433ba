import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface BuildInfo {
  /** package.json's version (semantic versioning; CHANGELOG.md, docs/operations.md "Releases"). */
  version: string;
  /** The git commit of the build (tools/build.mjs writes dist/build-info.json), or `unknown`. */
  commit: string;
}

let cached: BuildInfo | null = null;

/** What this process runs: read once, from the package's root (the nearest package.json named cws-connect above this file). */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'cws-connect') {
        cached = { version: pkg.version ?? 'unknown', commit: commitIn(join(dir, 'dist', 'build-info.json')) };
        return cached;
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return (cached = { version: 'unknown', commit: 'unknown' });
    dir = parent;
  }
}

function commitIn(file: string): string {
  try {
    const commit = (JSON.parse(readFileSync(file, 'utf8')) as { commit?: unknown }).commit;
    return typeof commit === 'string' && /^[\w.-]{1,64}$/.test(commit) ? commit : 'unknown';
  } catch {
    return 'unknown';
  }
}
