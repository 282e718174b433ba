import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/database/embedded-postgres.js';
import { runMigrations } from '../../src/database/migrate.js';
import { buildApp } from './spawn-app.js';

/**
 * Once per `npm test`: a PostgreSQL server (DATABASE_URL's, or an embedded one when it is unset), and a
 * template database with every migration applied. Each test file clones the template (fast, isolated).
 */
export async function setupDatabase(): Promise<void> {
  buildApp();
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    const dir = mkdtempSync(join(tmpdir(), 'cws-connect-test-'));
    const db = await startEmbeddedPostgres(dir, () => undefined);
    (globalThis as { __embeddedDb?: { stop(): Promise<void> } }).__embeddedDb = db;
    serverUrl = db.url;
    process.env.TEST_EMBEDDED_DATA_DIR = dir;
  }
  const runId = String(process.pid);
  const template = `cws_test_${runId}_template`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${template}`);
    await admin.query(`CREATE DATABASE ${template}`);
  } finally {
    await admin.end();
  }
  await runMigrations(withDatabase(serverUrl, template));
  process.env.TEST_PG_SERVER_URL = serverUrl;
  process.env.TEST_PG_TEMPLATE = template;
  process.env.TEST_RUN_ID = runId;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
