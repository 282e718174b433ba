// Inbound deliveries accepted per second (authenticated, stored durably, acknowledged) against a bare
// node:http endpoint that answers 200 without storing, same load generator, same run.
// Run: npx tsx bench/inbound.ts   (DATABASE_URL: a PostgreSQL server to create a scratch database on;
// unset: an embedded one). DURATION (s, default 10), CONNECTIONS (default 50).
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { startEmbeddedPostgres } from '../src/database/embedded-postgres.js';
import { runMigrations } from '../src/database/migrate.js';
import { SandboxServer } from 'cws-sandbox';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { freePort } from '../src/common/free-port.js';
import { buildApp, spawnApp } from '../test/support/spawn-app.js';

const DURATION = Number(process.env.DURATION ?? 10);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const BODY = JSON.stringify({
  id: 'dlv_00000000-0000-4000-8000-000000000000',
  event: 'workflow_step_updated',
  occurredAt: new Date().toISOString(),
  companyId: 'acme',
  workflowId: 'wf_1',
  transition: 'Review',
  workflow: { id: 'wf_1', name: 'NDA', step: 'Review', versionNumber: 1 },
});

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function load(url: string, headers: Record<string, string>): Promise<{ rps: number; p99: number; non2xx: number; errors: number }> {
  await autocannon({ url, method: 'POST', headers, body: BODY, connections: CONNECTIONS, duration: 2 }); // warm-up
  const r = await autocannon({ url, method: 'POST', headers, body: BODY, connections: CONNECTIONS, duration: DURATION });
  return { rps: r['2xx'] / DURATION, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

async function main(): Promise<void> {
  buildApp();
  let serverUrl = process.env.DATABASE_URL;
  let embedded: { stop(): Promise<void> } | null = null;
  if (!serverUrl) {
    const db = await startEmbeddedPostgres(mkdtempSync(join(tmpdir(), 'cws-bench-')), () => undefined);
    embedded = db;
    serverUrl = db.url;
  }
  const dbName = `cws_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const databaseUrl = withDatabase(serverUrl, dbName);
  await runMigrations(databaseUrl);

  const sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:9/oauth/callback'], recordLimit: 0 });
  const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
  const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;
  const port = await freePort();
  const app = await spawnApp(
    {
      NODE_ENV: 'production',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-bench-data-')),
      DATABASE_URL: databaseUrl,
      SANDBOX: 'off',
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: operatorKey,
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      CWS_SANDBOX_AUTH_URL: sandbox.url,
      CWS_SANDBOX_CLIENT_ID: sandbox.clientId,
      CWS_SANDBOX_CLIENT_SECRET: sandbox.clientSecret,
      LOG_LEVEL: 'warn',
    },
    { port },
  );
  const bare = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"id":"${randomUUID()}"}`));
  });
  await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  try {
    // A tenant without eventsTargetUrl: the events are stored as `no_target`, so outbound delivery does not
    // compete for the database during the measurement (ingest only, as the bare endpoint does).
    const created = await fetch(`${app.url}/v1/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'bench', name: 'Bench', environment: 'sandbox', allowedReturnUrls: ['https://partner.example/'] }),
    });
    if (created.status !== 201) throw new Error(`tenant creation answered ${created.status}`);
    const receiverId = randomUUID();
    const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
    const sealed = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) }).seal(authorization, { table: 'webhook_receivers', id: receiverId, column: 'secret_enc' });
    await pool.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, 'bench', 'bearer', $2)`, [receiverId, sealed]);

    const headers = { 'content-type': 'application/json', authorization };
    const base = await load(`http://127.0.0.1:${(bare.address() as AddressInfo).port}/inbound`, headers);
    const ours = await load(`${app.url}/inbound/bench/${receiverId}`, headers);
    const stored = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE tenant_id = 'bench'`);
    console.log(`autocannon, ${CONNECTIONS} connections, ${DURATION} s, ${BODY.length}-byte JSON body`);
    console.log(`bare node:http (no storing):    ${base.rps.toFixed(0)} req/s  p99 ${base.p99} ms  non-2xx ${base.non2xx}  errors ${base.errors}`);
    console.log(`cws-connect /inbound (stored):  ${ours.rps.toFixed(0)} req/s  p99 ${ours.p99} ms  non-2xx ${ours.non2xx}  errors ${ours.errors}`);
    console.log(`ratio: ${(ours.rps / base.rps).toFixed(3)} (cws-connect / bare); events stored: ${stored.rows[0].n}`);
  } finally {
    await pool.end();
    bare.close();
    await app.stop('SIGTERM');
    await sandbox.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    await embedded?.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
