import pg from 'pg';
import { withDatabase } from './database-setup.js';

export async function teardownDatabase(): Promise<void> {
  const serverUrl = process.env.TEST_PG_SERVER_URL;
  const template = process.env.TEST_PG_TEMPLATE;
  if (serverUrl && template) {
    const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
    await admin.connect();
    try {
      const rows = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [
        `cws_test_${process.env.TEST_RUN_ID}_%`,
      ]);
      for (const { datname } of rows.rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  }
  const embedded = (globalThis as { __embeddedDb?: { stop(): Promise<void> } }).__embeddedDb;
  await embedded?.stop();
}
