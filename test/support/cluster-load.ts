import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import pg from 'pg';
import type { SandboxServer } from 'cws-sandbox';
import { parseVaultKeys } from '../../src/config/app-config.js';
import { TokenVault } from '../../src/vault/token-vault.service.js';
import { seedConnections, type SeededConnection } from './seed-connections.js';
import { waitUntil, type WebhookSink } from './webhook-sink.js';

const USERS = ['alice', 'bob', 'carol', 'dave'];

/**
 * What a deployment under a mixed load needs: a tenant whose events go to `sink`, a webhook receiver the
 * upstream delivers to, a user connection for facade calls, and `storm` more connections for renewal storms.
 */
export interface ClusterFixture {
  tenantId: string;
  receiverId: string;
  /** The receiver's Authorization (what the upstream sends with each delivery). */
  receiverAuth: string;
  operatorKey: string;
  /** The user connections seeded: u-alice's (the load's), then storm-0, storm-1, … */
  connections: SeededConnection[];
}

export async function prepareCluster(
  url: string,
  db: pg.Pool,
  o: { operatorKey: string; vaultKeys: string; sandbox: SandboxServer; sink: WebhookSink; storm: number },
): Promise<ClusterFixture> {
  const tenantId = 'fleet';
  const created = await fetch(`${url}/v1/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${o.operatorKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      id: tenantId,
      name: 'Fleet',
      environment: 'sandbox',
      allowedReturnUrls: ['http://localhost:5173/'],
      eventsTargetUrl: o.sink.url,
    }),
  });
  if (created.status !== 201) throw new Error(`tenant creation answered ${created.status}: ${await created.text()}`);
  // The receiver a self-targeted provisioning would create (provisioning itself: webhooks.e2e-spec.ts).
  const receiverId = randomUUID();
  const receiverAuth = `Bearer ${randomBytes(32).toString('base64url')}`;
  const vault = new TokenVault({ vaultKeys: parseVaultKeys(o.vaultKeys) });
  const sealed = await vault.seal(receiverAuth, { table: 'webhook_receivers', id: receiverId, column: 'secret_enc', tenantId });
  await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, $2, 'bearer', $3)`, [
    receiverId,
    tenantId,
    sealed,
  ]);
  const connections = await seedConnections(db, o.vaultKeys, [
    { tenantId, userId: 'u-alice', upstreamUserId: 'alice', tokens: o.sandbox.issueTokens('alice') },
    ...Array.from({ length: o.storm }, (_, i) => ({
      tenantId,
      userId: `storm-${i}`,
      upstreamUserId: USERS[i % USERS.length],
      tokens: o.sandbox.issueTokens(USERS[i % USERS.length]),
    })),
  ]);
  return { tenantId, receiverId, receiverAuth, operatorKey: o.operatorKey, connections };
}

/** Every storm connection due now: the instances' schedulers renew them all at once. */
export async function renewalStorm(db: pg.Pool): Promise<number> {
  const r = await db.query(`UPDATE connections SET refresh_due_at = now() WHERE user_id LIKE 'storm-%' AND status = 'active'`);
  return r.rowCount ?? 0;
}

interface Answer {
  status: number;
  body: string;
}

/**
 * A steady mixed load: facade reads (`GET /me`), small streamed uploads (`POST /workflows`) and inbound
 * deliveries, from `workers` keep-alive clients, each request to `target()` (a load balancer, or instances in
 * turn). Any answer other than the expected 2xx, and any connection-level error, is a failed client request.
 */
export class MixedLoad {
  readonly failures: string[] = [];
  /** Inbound deliveries acknowledged: event id -> delivery sequence number. */
  readonly acked = new Map<string, number>();
  readonly counts = { facade: 0, uploads: 0, inbound: 0 };
  private running = false;
  private loops: Promise<void>[] = [];
  private seq = 0;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 64 });

  constructor(
    private readonly fixture: ClusterFixture,
    private readonly target: (n: number) => string,
    private readonly workers = 6,
  ) {}

  start(): void {
    this.running = true;
    this.loops = Array.from({ length: this.workers }, (_, w) => this.loop(w));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.agent.destroy();
  }

  /** The failures grouped by their first words, for a test's printout. */
  failureSummary(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const f of this.failures) {
      const key = f.replace(/via \S+: /, '').slice(0, 60);
      out[key] = (out[key] ?? 0) + 1;
    }
    return out;
  }

  get total(): number {
    return this.counts.facade + this.counts.uploads + this.counts.inbound;
  }

  private async loop(worker: number): Promise<void> {
    for (let n = worker; this.running; n += this.workers) {
      const kind = n % 3;
      const base = this.target(n);
      try {
        if (kind === 0) await this.facadeRead(base);
        else if (kind === 1) await this.upload(base);
        else await this.inbound(base);
      } catch (e) {
        this.failures.push(`${['facade', 'upload', 'inbound'][kind]} via ${base}: ${(e as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  private async facadeRead(base: string): Promise<void> {
    const res = await this.send(`${base}/v1/tenants/${this.fixture.tenantId}/me`, 'GET', this.userHeaders(), null);
    if (res.status !== 200) throw new Error(`GET /me answered ${res.status} ${res.body.slice(0, 120)}`);
    this.counts.facade++;
  }

  private async upload(base: string): Promise<void> {
    const boundary = `----load${randomBytes(6).toString('hex')}`;
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nLoad contract\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="contract"; filename="c.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      ),
      randomBytes(16 * 1024),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const headers = { ...this.userHeaders(), 'content-type': `multipart/form-data; boundary=${boundary}` };
    const res = await this.send(`${base}/v1/tenants/${this.fixture.tenantId}/workflows`, 'POST', headers, body);
    if (res.status !== 201) throw new Error(`POST /workflows answered ${res.status} ${res.body.slice(0, 120)}`);
    this.counts.uploads++;
  }

  private async inbound(base: string): Promise<void> {
    const seq = this.seq++;
    const body = Buffer.from(JSON.stringify({ event: 'workflow_step_updated', seq, transition: 'Review' }));
    const res = await this.send(
      `${base}/inbound/${this.fixture.tenantId}/${this.fixture.receiverId}`,
      'POST',
      { authorization: this.fixture.receiverAuth, 'content-type': 'application/json' },
      body,
    );
    if (res.status !== 200) throw new Error(`inbound answered ${res.status} ${res.body.slice(0, 120)}`);
    this.acked.set((JSON.parse(res.body) as { id: string }).id, seq);
    this.counts.inbound++;
  }

  private userHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.fixture.operatorKey}`, 'x-user-id': 'u-alice' };
  }

  private send(url: string, method: string, headers: Record<string, string>, body: Buffer | null): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { method, agent: this.agent, headers, timeout: 30_000 }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('no answer in 30 s')));
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  }
}

export interface Outcome {
  /** Acknowledged inbound deliveries that never reached the partner. */
  lost: number;
  /** Acknowledged deliveries the partner accepted more than once. */
  forwardedTwice: number;
  reauthRequired: number;
  refreshReuses: number;
  leasesLeft: number;
}

/** Waits until the partner has every acknowledged delivery and no renewal is due or leased, then counts. */
export async function settle(db: pg.Pool, load: MixedLoad, sink: WebhookSink, sandbox: SandboxServer): Promise<Outcome> {
  const delivered = () => new Set(sink.accepted().map((d) => String(d.headers['webhook-id'])));
  await waitUntil(
    'every acknowledged delivery at the partner',
    () => {
      const got = delivered();
      for (const id of load.acked.keys()) if (!got.has(id)) return false;
      return true;
    },
    60_000,
    200,
  ).catch(() => undefined);
  await waitUntil(
    'every storm connection renewed',
    async () =>
      (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM connections WHERE status = 'active' AND (refresh_due_at <= now() OR lease_owner IS NOT NULL)`,
        )
      ).rows[0].n === 0,
    60_000,
    200,
  ).catch(() => undefined);
  const got = delivered();
  const perId = new Map<string, number>();
  for (const d of sink.accepted()) perId.set(String(d.headers['webhook-id']), (perId.get(String(d.headers['webhook-id'])) ?? 0) + 1);
  const one = async (sql: string) => (await db.query<{ n: number }>(sql)).rows[0].n;
  return {
    lost: [...load.acked.keys()].filter((id) => !got.has(id)).length,
    forwardedTwice: [...perId.values()].filter((n) => n > 1).length,
    reauthRequired: await one(`SELECT count(*)::int AS n FROM connections WHERE status = 'reauth_required'`),
    refreshReuses: sandbox.stats().refreshReuses,
    leasesLeft: await one(`SELECT count(*)::int AS n FROM connections WHERE lease_owner IS NOT NULL`),
  };
}
