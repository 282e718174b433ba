import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request as httpRequest, type ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SandboxServer } from 'cws-sandbox';
import { newTenantAt } from './support/connect.js';
import { seedConnections } from './support/seed-connections.js';
import { ROOT, spawnApp, waitForOutput, type SpawnedApp } from './support/spawn-app.js';
import { spawnedEnv, testVaultKey } from './support/test-app.js';
import { createTestDatabase } from './support/test-database.js';
import { waitUntil } from './support/webhook-sink.js';

const STORM = 300;
const USERS = ['alice', 'bob', 'carol', 'dave'];

interface Answer {
  status: number;
  connection: string | undefined;
  body: string;
}

/** One request on `agent` (keep-alive); resolves with the answer, rejects on a connection-level failure. */
function call(agent: Agent, url: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A multipart upload whose file part is sent a chunk every 50 ms until `finish()` is called. */
function slowUpload(url: string, headers: Record<string, string>) {
  const boundary = `----drain${randomBytes(6).toString('hex')}`;
  let sent = 0;
  let req: ClientRequest;
  let timer: NodeJS.Timeout;
  const answer = new Promise<Answer>((resolve, reject) => {
    req = httpRequest(url, {
      method: 'POST',
      agent: false,
      headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    });
    req.on('error', reject);
    req.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nSlow contract\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="contract"; filename="slow.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    timer = setInterval(() => {
      req.write(randomBytes(4096));
      sent += 4096;
    }, 50);
  });
  return {
    answer,
    sent: () => sent,
    finish() {
      clearInterval(timer);
      req.end(`\r\n--${boundary}--\r\n`);
    },
  };
}

/** A keep-alive connection that made one request and then sits idle. */
async function idleKeepAlive(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  let got = '';
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (d: Buffer) => {
      got += d.toString();
      if (got.includes('"status":"ok"')) resolve();
    });
    socket.write('GET /health/live HTTP/1.1\r\nhost: drain\r\nconnection: keep-alive\r\n\r\n');
  });
  return { socket, closed };
}

/**
 * The drain of docs/api.md section 9 in a real process: SIGTERM during a renewal storm, with a keep-alive
 * client calling the facade, a slow streamed upload in flight, and an idle keep-alive connection open.
 */
describe('SIGTERM drains the instance', () => {
  let sandbox: SandboxServer;
  let db: pg.Pool;
  let env: Record<string, string>;
  let app: SpawnedApp | null = null;
  const vaultKeys = testVaultKey('drain');
  const operatorKey = `cwsop_test_${randomBytes(24).toString('base64url')}`;
  const headers = { authorization: `Bearer ${operatorKey}`, 'x-user-id': 'u-alice' };

  beforeAll(async () => {
    const databaseUrl = await createTestDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    sandbox = await SandboxServer.start({ redirectUris: ['http://127.0.0.1:1/oauth/callback'], recordLimit: 5000 });
    env = spawnedEnv('drain', databaseUrl, sandbox, operatorKey, {
      LOG_LEVEL: 'info',
      VAULT_KEYS: vaultKeys,
      SHUTDOWN_DELAY_MS: '3000',
      SHUTDOWN_TIMEOUT_MS: '30000',
      // An idle keep-alive connection would otherwise be closed by its own timeout; the drain must close it.
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '600000',
      REFRESH_BATCH_SIZE: '25',
      REFRESH_LEASE_MS: '10000',
      UPSTREAM_TOKEN_TIMEOUT_MS: '2000',
    });
    app = await spawnApp(env, { readyTimeoutMs: 60_000 });
    await newTenantAt(app.url, operatorKey, 'acme');
    await seedConnections(db, vaultKeys, [
      { tenantId: 'acme', userId: 'u-alice', upstreamUserId: 'alice', tokens: sandbox.issueTokens('alice') },
    ]);
  }, 120_000);

  afterAll(async () => {
    if (app && app.proc.exitCode === null && app.proc.signalCode === null) await app.stop('SIGKILL');
    await db?.end();
    await sandbox?.close();
  }, 60_000);

  it('keeps serving during the delay, finishes the upload, closes idle keep-alive, releases its leases and exits 0', async () => {
    const running = app!;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const facade = `${running.url}/v1/tenants/acme/me`;
    expect((await call(agent, facade, headers)).status).toBe(200);

    // A renewal storm with slow token answers, so that the instance holds leases when the signal comes.
    sandbox.setFault({ mode: 'slow', delayMs: 300, paths: ['/oauth/token'] });
    const now = new Date();
    await seedConnections(
      db,
      vaultKeys,
      Array.from({ length: STORM }, (_, i) => ({
        tenantId: 'acme',
        userId: `u-${i}`,
        upstreamUserId: USERS[i % USERS.length],
        tokens: sandbox.issueTokens(USERS[i % USERS.length]),
        dueAt: now,
      })),
    );
    const leasedAtSignal = await waitUntil(
      'leases held by the instance',
      async () =>
        (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE lease_owner IS NOT NULL`)).rows[0].n || null,
      30_000,
    );

    const upload = slowUpload(`${running.url}/v1/tenants/acme/workflows`, headers);
    await waitUntil('the upload under way', () => upload.sent() >= 8192 || null);
    const idle = await idleKeepAlive(running.port);

    // A keep-alive client calling every 50 ms through the whole drain: every answer it gets must be a 200.
    const answers: Answer[] = [];
    const refused: string[] = [];
    let calling = true;
    const loop = (async () => {
      while (calling) {
        try {
          answers.push(await call(agent, facade, headers));
        } catch (e) {
          refused.push((e as NodeJS.ErrnoException).code ?? String(e));
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    running.proc.kill('SIGTERM');
    const exited = new Promise<number | null>((r) => running.proc.once('exit', (code) => r(code)));
    await waitForOutput(running, /drain: \/health\/ready answers 503/);
    const ready = await fetch(`${running.url}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
    // Liveness stays 200 through the drain, with the release it runs (the banner names it too).
    const live = (await (await fetch(`${running.url}/health/live`)).json()) as { status: string; version: string; commit: string };
    const { version } = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { version: string };
    // The build's commit: this checkout's HEAD, or `unknown` in a copy that is no git checkout of its own (tools/build.mjs).
    const git = (...args: string[]) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
    const top = git('rev-parse', '--show-toplevel');
    const own = top.status === 0 && relative(top.stdout.trim(), ROOT) === '';
    const commit = process.env.CWS_BUILD_COMMIT?.trim() || (own ? git('rev-parse', 'HEAD').stdout.trim() : 'unknown');
    expect(live).toEqual({ status: 'ok', version, commit });
    expect(running.output.join('')).toContain(`version ${version}, commit ${live.commit})`);

    // Ten calls on the keep-alive client during the delay: answered, and told to close their connection.
    const during: Answer[] = [];
    for (let i = 0; i < 10; i++) during.push(await call(agent, facade, headers));
    expect(running.output.join('')).not.toMatch(/drain: no longer accepting/);
    expect(during.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(during.every((a) => a.connection === 'close')).toBe(true);

    // The listener closes while the upload is still streaming; it then finishes and is answered.
    const closing = await waitForOutput(running, /drain: no longer accepting connections; (\d+) requests in flight/, 15_000);
    expect(Number(closing[1])).toBeGreaterThanOrEqual(1); // the upload
    calling = false;
    await loop;
    upload.finish();
    const uploaded = await upload.answer;
    expect(uploaded.status).toBe(201);
    expect((JSON.parse(uploaded.body) as { documents: Array<{ size: number }> }).documents[0].size).toBe(upload.sent());

    expect(await exited).toBe(0);
    await idle.closed; // closed by the server, not by this client
    const out = running.output.join('');
    expect(out).not.toMatch(/SHUTDOWN_TIMEOUT_MS .* reached/);
    const steps = [
      /SIGTERM: stopping, draining first/,
      /drain: \/health\/ready answers 503/,
      /drain: no longer accepting connections/,
      /drain: every request finished and every connection closed, (\d+) ms after the signal/,
      /drain: renewals stopped; (\d+) renewal leases released/,
      /drain: event delivery stopped; \d+ deliveries in flight returned to the queue/,
      /drain: done in (\d+) ms; exiting 0/,
    ];
    const positions = steps.map((step) => out.search(step));
    expect(steps.filter((_, i) => positions[i] < 0)).toEqual([]);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    sandbox.setFault(null);
    const leases = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE lease_owner IS NOT NULL`);
    const reauth = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM connections WHERE status <> 'active'`);
    const errors = answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.body.slice(0, 80)}`);
    console.log(
      `drain: ${answers.length + during.length} facade calls answered (${errors.length} not 200), ${refused.length} refused after the listener closed ` +
        `(${[...new Set(refused)].join(', ') || 'none'}); ${leasedAtSignal} leases held at the signal, ${/(\d+) renewal leases released/.exec(out)?.[1]} released by the drain; ` +
        `upload of ${upload.sent()} bytes answered ${uploaded.status}; drained in ${/drain: done in (\d+) ms/.exec(out)?.[1]} ms (SHUTDOWN_DELAY_MS 3000)`,
    );
    expect(errors).toEqual([]);
    expect(refused.every((code) => code === 'ECONNREFUSED' || code === 'ECONNRESET')).toBe(true);
    expect(leases.rows[0].n).toBe(0);
    expect(Number(/(\d+) renewal leases released/.exec(out)?.[1])).toBeGreaterThan(0);
    expect(reauth.rows[0].n).toBe(0);
    expect(sandbox.stats().refreshReuses).toBe(0);
    agent.destroy();
    idle.socket.destroy();
  }, 120_000);

  it('cuts what is still in flight at SHUTDOWN_TIMEOUT_MS, says so, and still exits 0', async () => {
    app = await spawnApp({ ...env, SHUTDOWN_DELAY_MS: '0', SHUTDOWN_TIMEOUT_MS: '1000' }, { readyTimeoutMs: 60_000 });
    const running = app;
    const exited = new Promise<number | null>((r) => running.proc.once('exit', (code) => r(code)));
    const upload = slowUpload(`${running.url}/v1/tenants/acme/workflows`, headers);
    const outcome = upload.answer.then(
      (a) => `answered ${a.status}`,
      (e: NodeJS.ErrnoException) => `cut (${e.code ?? e.message})`,
    );
    await waitUntil('the upload under way', () => upload.sent() >= 8192 || null);
    running.proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    upload.finish();
    expect(await outcome).toMatch(/^cut/);
    expect(running.output.join('')).toMatch(
      /drain: SHUTDOWN_TIMEOUT_MS \(1000 ms\) reached with 1 requests in flight; closing their connections/,
    );
  }, 90_000);

  it('exits at once on a second signal, with 128 + the signal number', async () => {
    app = await spawnApp({ ...env, SHUTDOWN_DELAY_MS: '60000' }, { readyTimeoutMs: 60_000 });
    const running = app;
    const exited = new Promise<number | null>((r) => running.proc.once('exit', (code) => r(code)));
    running.proc.kill('SIGTERM');
    await waitForOutput(running, /drain: \/health\/ready answers 503/);
    running.proc.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(running.output.join('')).toMatch(/SIGINT again: exiting at once/);
  }, 90_000);
});
