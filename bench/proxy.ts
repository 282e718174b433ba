// The facade's overhead, measured against a bare pass-through proxy in the same run.
//   npx tsx bench/proxy.ts            (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (3), BENCH_SECONDS (5), BENCH_CONNECTIONS (50), BENCH_LOG_LEVEL (info), BENCH_SKIP_BUILD=1,
// BENCH_PROFILE=<dir> (a CPU profile of the app), BENCH_VERBOSE=1 (children's stderr).
// Each server runs in its own process: the sandbox, the bare proxy, the app (compiled: NestJS needs
// decorator metadata, which tsx does not emit). autocannon runs here. Not part of `npm test`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { authorizeAtSandbox, openCallback } from '../test/support/connect.js';
import { freePort } from '../src/common/free-port.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const children: ChildProcess[] = [];

function start(name: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.on('data', (d: Buffer) => {
    if (process.env.BENCH_VERBOSE) process.stderr.write(`[${name}] ${d.toString()}`);
  });
  children.push(child);
  return child;
}

async function ready(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function json<T>(res: Response): Promise<T> {
  if (res.status >= 300) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

interface Row {
  mode: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** CPU time of the serving process (the proxy, or the sandbox when called directly) per request. */
  cpuUs: number;
}

/** user + system CPU time of a process so far, in ms (Linux /proc). */
function cpuMs(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (100 Hz)
  } catch {
    return 0;
  }
}

/** Transactions committed in the app's database so far (the statistics lag by up to PGSTAT's flush interval). */
async function transactions(databaseUrl: string): Promise<number> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    await c.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
    const r = await c.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()');
    return Number(r.rows[0].n);
  } finally {
    await c.end();
  }
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) {
    console.log('building the app (tsc)...');
    spawnSync(process.execPath, [resolve(ROOT, 'node_modules/typescript/bin/tsc'), '-p', resolve(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: 'ignore' });
  }
  const dbName = `cws_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  try {
    await run(withDatabase(SERVER_URL, dbName));
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

async function run(databaseUrl: string): Promise<void> {
  const [sandboxPort, barePort, appPort] = [await freePort(), await freePort(), await freePort()];
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
  const appUrl = `http://127.0.0.1:${appPort}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;

  const sandboxProc = start('sandbox', ['--import', 'tsx', 'src/sandbox/standalone.ts'], {
    SANDBOX_PORT: String(sandboxPort),
    SANDBOX_CLIENT_ID: 'bench',
    SANDBOX_CLIENT_SECRET: clientSecret,
    SANDBOX_REDIRECT_URIS: `${appUrl}/oauth/callback`,
    SANDBOX_RECORD_LIMIT: '0',
  });
  await ready(`${sandboxUrl}/_sandbox/users`);
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const appProc = start('app', [...profile, 'dist/src/main.js'], {
    NODE_ENV: 'production',
    PORT: String(appPort),
    PUBLIC_URL: appUrl,
    DATABASE_URL: databaseUrl,
    SANDBOX: 'off',
    VAULT_KEYS: `bench:${randomBytes(32).toString('base64')}`,
    OPERATOR_API_KEY: operatorKey,
    CWS_SANDBOX_AUTH_URL: sandboxUrl,
    CWS_SANDBOX_CLIENT_ID: 'bench',
    CWS_SANDBOX_CLIENT_SECRET: clientSecret,
    CWS_SANDBOX_SCOPES: 'workflows.read workflows.write webhooks.manage userinfo.read',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  });
  await ready(`${appUrl}/health/ready`);

  // A tenant, its key, alice connected through the real OAuth flow; a token of alice's for the baselines.
  const op = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };
  await json(await fetch(`${appUrl}/v1/tenants`, { method: 'POST', headers: op, body: JSON.stringify({ id: 'bench', name: 'bench', environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }) }));
  const { key } = await json<{ key: string }>(await fetch(`${appUrl}/v1/tenants/bench/api-keys`, { method: 'POST', headers: op, body: '{}' }));
  const { connectUrl } = await json<{ connectUrl: string }>(
    await fetch(`${appUrl}/v1/tenants/bench/connect-sessions`, { method: 'POST', headers: op, body: JSON.stringify({ kind: 'user', userId: 'u-alice', returnUrl: 'http://localhost:5173/done' }) }),
  );
  const back = await openCallback(await authorizeAtSandbox(connectUrl, 'alice', 'approve'));
  if (new URL(back.headers.get('location') ?? 'x:/').searchParams.get('status') !== 'connected') throw new Error('connecting alice failed');
  const { access_token: token } = await json<{ access_token: string }>(
    await fetch(`${sandboxUrl}/_sandbox/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: 'alice' }) }),
  );
  for (let i = 0; i < 5; i++) {
    await json(
      await fetch(`${sandboxUrl}/workflows`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `Bench contract ${i}`, approvers: ['bob'] }),
      }),
    );
  }
  const bareProc = start('bare', ['--import', 'tsx', 'bench/bare-proxy.ts'], { TARGET: sandboxUrl, TOKEN: token, PORT: String(barePort) });
  await ready(`http://127.0.0.1:${barePort}/workflows`);

  // `pid`: the proxy whose CPU time per request is reported (none for the direct calls).
  const modes: Array<{ mode: string; url: string; headers: Record<string, string>; pid?: number }> = [
    { mode: 'sandbox (direct)', url: `${sandboxUrl}/workflows`, headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, pid: sandboxProc.pid },
    { mode: 'bare proxy', url: `http://127.0.0.1:${barePort}/workflows`, headers: { accept: 'application/json' }, pid: bareProc.pid },
    { mode: 'facade', url: `${appUrl}/v1/tenants/bench/workflows`, headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice', accept: 'application/json' }, pid: appProc.pid },
  ];
  const sample = await fetch(modes[2].url, { headers: modes[2].headers });
  const body = await sample.text();
  if (sample.status !== 200) throw new Error(`the facade answered ${sample.status}: ${body}`);
  console.log(`GET /workflows answers ${body.length} bytes; ${CONNECTIONS} connections, ${ROUNDS} rounds x ${SECONDS} s per mode, alternating\n`);

  for (const m of modes) await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: 2 }); // warm-up
  const results = new Map<string, Row[]>();
  let dbTransactions = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    for (const m of modes) {
      const before = m.mode === 'facade' ? await transactions(databaseUrl) : 0;
      const cpuBefore = cpuMs(m.pid);
      const r: Result = await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: SECONDS });
      const cpuUs = ((cpuMs(m.pid) - cpuBefore) * 1000) / Math.max(1, r.requests.total);
      if (m.mode === 'facade') dbTransactions += (await transactions(databaseUrl)) - before - 1;
      const row = { mode: m.mode, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx + r.errors + r.timeouts, cpuUs };
      console.log(
        `round ${round}  ${m.mode.padEnd(18)} ${row.rps.toFixed(0).padStart(7)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  server CPU ${cpuUs.toFixed(0)} µs/req${row.non2xx ? `  (${row.non2xx} failed)` : ''}`,
      );
      results.set(m.mode, [...(results.get(m.mode) ?? []), row]);
    }
  }

  const summary = modes.map((m) => {
    const rows = results.get(m.mode) ?? [];
    return {
      mode: m.mode,
      rps: median(rows.map((r) => r.rps)),
      p50: median(rows.map((r) => r.p50)),
      p99: median(rows.map((r) => r.p99)),
      cpuUs: median(rows.map((r) => r.cpuUs)),
      failed: rows.reduce((n, r) => n + r.non2xx, 0),
    };
  });
  console.log('\n| path (median of rounds) | req/s | p50 ms | p99 ms | serving process CPU µs/req | failed |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const s of summary) console.log(`| ${s.mode} | ${s.rps.toFixed(0)} | ${s.p50} | ${s.p99} | ${s.cpuUs.toFixed(0)} | ${s.failed} |`);
  const bare = summary[1];
  const facade = summary[2];
  const ratio = facade.rps / bare.rps;
  const addedP99 = facade.p99 - bare.p99;
  console.log(`\ndatabase transactions committed during the facade rounds: ${dbTransactions} (the hot path needs none)`);
  console.log(`facade / bare proxy throughput: ${ratio.toFixed(2)} (goal >= 0.80)   added p99: ${addedP99.toFixed(1)} ms (goal <= 2 ms)`);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    for (const c of children) c.kill('SIGKILL');
    process.exit(1);
  },
);
