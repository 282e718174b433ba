import { execFileSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

// The embedded PostgreSQL started by root: the user it runs as, and the way down to its data directory.

/** The user PostgreSQL runs as when cws-connect runs as root (PostgreSQL refuses to run as root). */
export interface RunAs {
  name: 'postgres';
  uid: number;
  gid: number;
}

/** The uid and gid a child process of PostgreSQL's runs with (none: this process's own). */
export function ids(runAs: RunAs | null): { uid?: number; gid?: number } {
  return runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
}

/** The `postgres` system user, created when missing (PostgreSQL refuses to run as root). */
export function postgresUser(): RunAs {
  const lookup = () => {
    try {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
      return { name: 'postgres' as const, uid, gid };
    } catch {
      return null;
    }
  };
  const found = lookup();
  if (found) return found;
  try {
    execFileSync('groupadd', ['--system', '-f', 'postgres'], { stdio: 'ignore' });
    execFileSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], {
      stdio: 'ignore',
    });
  } catch (e) {
    throw new Error(
      `the embedded PostgreSQL runs as the postgres user when started as root, and that user could not be created (${(e as Error).message}); create it, or set DATABASE_URL`,
      { cause: e },
    );
  }
  const created = lookup();
  if (!created)
    throw new Error(
      'the embedded PostgreSQL runs as the postgres user when started as root, and that user could not be found after creating it; set DATABASE_URL',
    );
  return created;
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to walk down to its data directory.
 * DATA_DIR itself is opened for traversal (x, not r); a closed ancestor is reported. The default DATA_DIR
 * is chosen so that this holds (see src/config/local-data.ts).
 */
export function ensureTraversable(dataDir: string): void {
  const mode = statSync(dataDir).mode;
  if ((mode & 0o001) === 0) chmodSync(dataDir, (mode & 0o7777) | 0o011);
  for (let d = dirname(dataDir); d !== dirname(d); d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(
        `DATA_DIR: the embedded PostgreSQL runs as the postgres user, which cannot enter ${d}; unset DATA_DIR (the default is chosen where it can), choose one outside ${d}, or set DATABASE_URL`,
      );
    }
  }
}

export function lastLine(text: string): string {
  return text.trim().split('\n').at(-1)?.trim() ?? '';
}
