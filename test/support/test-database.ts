import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { withDatabase } from './database-setup.js';

/** A fresh database for one test file, cloned from the migrated template (see database-setup.ts). */
export async function createTestDatabase(): Promise<string> {
  const serverUrl = required('TEST_PG_SERVER_URL');
  const template = required('TEST_PG_TEMPLATE');
  const name = `cws_test_${required('TEST_RUN_ID')}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    // CREATE DATABASE ... TEMPLATE fails while another session is connected to the template; retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (e) {
        if (attempt >= 20) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await admin.end();
  }
  return withDatabase(serverUrl, name);
}

/** An empty database (no migration applied), dropped with the run's others: what a first start of a release meets. */
export async function createEmptyDatabase(): Promise<string> {
  const serverUrl = required('TEST_PG_SERVER_URL');
  const name = `cws_test_${required('TEST_RUN_ID')}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return withDatabase(serverUrl, name);
}

/** A plain pg pool on a test database, for assertions on what is stored. */
export function openPool(databaseUrl: string): pg.Pool {
  return new pg.Pool({ connectionString: databaseUrl, max: 4 });
}

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the e2e tests through jest (test/support/global-setup.mjs)`);
  return v;
}
