import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { parseVaultKeys } from '../src/config/app-config.js';
import { SandboxServer } from 'cws-sandbox';
import { TokenVault } from '../src/vault/token-vault.service.js';
import { freePort } from '../src/common/free-port.js';
import { spawnApp, type SpawnedApp } from './support/spawn-app.js';
import { createTestDatabase } from './support/test-database.js';
import { sandboxEnv } from './support/test-app.js';
import { waitUntil, WebhookSink } from './support/webhook-sink.js';

const TOTAL = 2000;
const CONCURRENCY = 50;

/**
 * Invariant 7 under load and failure: 2,000 inbound deliveries in a burst over two instances on one
 * database, the partner failing every other request, one instance SIGKILLed midway. Every acknowledged
 * delivery reaches the partner at least once, always under its one webhook-id.
 */
describe('webhooks under load: two instances, a failing partner, a SIGKILL (invariant 7)', () => {
  let sandbox: SandboxServer;
  let sink: WebhookSink;
  let db: pg.Pool;
  const apps: SpawnedApp[] = [];
  const tenantId = 'burst';
  const receiverId = randomUUID();
  const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;

  beforeAll(async () => {
    const databaseUrl = await createTestDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    sink = await WebhookSink.start();
    sink.respond = (n) => (n % 2 === 0 ? 500 : 200);
    const ports = [await freePort(), await freePort()];
    sandbox = await SandboxServer.start({ redirectUris: ports.map((p) => `http://127.0.0.1:${p}/oauth/callback`) });
    const vaultKeys = `burst:${randomBytes(32).toString('base64')}`;
    const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
    const env = {
      NODE_ENV: 'test',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-burst-')),
      DATABASE_URL: databaseUrl,
      SANDBOX: 'off',
      VAULT_KEYS: vaultKeys,
      OPERATOR_API_KEY: operatorKey,
      ...sandboxEnv(sandbox),
      EVENTS_RETRY_BASE_MS: '100',
      EVENTS_RETRY_MAX_MS: '1000',
      EVENTS_POLL_INTERVAL_MS: '500',
      EVENTS_RELAY_INTERVAL_MS: '200',
      EVENTS_BATCH_SIZE: '100',
      EVENTS_JOB_EXPIRE_SECONDS: '4',
      EVENTS_MAINTENANCE_SECONDS: '1',
      LOG_LEVEL: 'warn',
    };
    apps.push(...(await Promise.all(ports.map((port) => spawnApp({ ...env, PUBLIC_URL: `http://127.0.0.1:${port}` }, { port })))));

    const created = await fetch(`${apps[0].url}/v1/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        id: tenantId,
        name: 'Burst',
        environment: 'sandbox',
        allowedReturnUrls: ['http://localhost:5173/'],
        eventsTargetUrl: sink.url,
      }),
    });
    expect(created.status).toBe(201);
    // The receiver a self-targeted provisioning would create (provisioning itself: webhooks.e2e-spec.ts).
    const vault = new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) });
    const sealed = await vault.seal(authorization, { table: 'webhook_receivers', id: receiverId, column: 'secret_enc', tenantId });
    await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, 'bearer', $3)`, [
      receiverId,
      tenantId,
      sealed,
    ]);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop('SIGTERM')));
    await sandbox?.close();
    await sink?.close();
    await db?.end();
  });

  it('every acknowledged delivery reaches the partner, each under one webhook-id', async () => {
    const started = Date.now();
    const acked = new Map<string, number>(); // event id -> sequence number of the delivery
    let next = 0;
    let killed = false;
    let retriedAfterKill = 0;

    const sendOne = async (seq: number): Promise<void> => {
      const body = JSON.stringify({ event: 'workflow_step_updated', seq, transition: 'Review' });
      for (let attempt = 0; ; attempt++) {
        // Round robin over the instances still alive, as a load balancer would.
        const alive = apps.filter((a) => !(killed && a === apps[1]));
        const app = alive[(seq + attempt) % alive.length];
        try {
          const res = await fetch(`${app.url}/inbound/${tenantId}/${receiverId}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization },
            body,
          });
          if (res.status === 200) {
            acked.set(((await res.json()) as { id: string }).id, seq);
            return;
          }
          throw new Error(`status ${res.status}`);
        } catch (e) {
          // The upstream retries an unacknowledged delivery; only a killed instance may cause one here.
          if (!killed || attempt > 5) throw e;
          retriedAfterKill++;
        }
      }
    };
    const worker = async (): Promise<void> => {
      while (next < TOTAL) {
        const seq = next++;
        if (seq === TOTAL / 2 && !killed) {
          killed = true;
          void apps[1].stop('SIGKILL');
        }
        await sendOne(seq);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const burstMs = Date.now() - started;
    expect(acked.size).toBe(TOTAL);
    expect(new Set(acked.values()).size).toBe(TOTAL);

    await waitUntil(
      'every acknowledged event at the partner',
      () => {
        const delivered = new Set(sink.accepted().map((d) => String(d.headers['webhook-id'])));
        for (const id of acked.keys()) if (!delivered.has(id)) return false;
        return true;
      },
      60_000,
      250,
    );

    // One webhook-id is one event: every delivery under an id carries the same body data.
    const dataById = new Map<string, string>();
    for (const d of sink.received) {
      const id = String(d.headers['webhook-id']);
      const data = JSON.stringify(d.body.data);
      expect(dataById.get(id) ?? data).toBe(data);
      dataById.set(id, data);
    }
    // The partner's 2xx lands before the service records it: give the last few a moment to be marked.
    const statesOf = () =>
      db.query<{ delivery_state: string; n: number }>(
        `SELECT delivery_state, count(*)::int AS n FROM events WHERE id = ANY($1::uuid[]) GROUP BY 1`,
        [[...acked.keys()]],
      );
    await waitUntil('every acknowledged event marked delivered', async () => (await statesOf()).rows.length === 1, 10_000, 100).catch(
      () => undefined,
    );
    expect((await statesOf()).rows).toEqual([{ delivery_state: 'delivered', n: acked.size }]);
    const failed = sink.received.filter((d) => d.status >= 500).length;
    expect(failed).toBeGreaterThan(TOTAL / 4);
    console.log(
      `burst: ${TOTAL} deliveries acknowledged in ${burstMs} ms (${retriedAfterKill} retried after the SIGKILL); all at the partner after ${Date.now() - started} ms; ` +
        `${sink.received.length} partner requests (${failed} answered 500), ${dataById.size} distinct webhook-ids`,
    );
  }, 90_000);
});
