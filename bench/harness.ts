// What the facade benchmarks share: a scratch database, the sandbox and the compiled app, each in its own
// process, tenants with a connected user. Not part of `npm test`.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { authorizeAtSandbox, openCallback } from '../test/support/connect.js';
import { buildApp } from '../test/support/spawn-app.js';
import { freePort } from '../src/common/free-port.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const children: ChildProcess[] = [];

// Every bench says which runtime it ran on (the benches that do not use the harness import it for this line alone).
console.log(`runtime: Node ${process.version} (${process.platform}-${process.arch}), ${availableParallelism()} cores`);

/**
 * BENCH_CALLGRIND=<dir>: the proxies run under `valgrind --tool=callgrind`, their profiles in <dir>, so that a
 * bench can count the instructions a request costs (callgrindInstructions), which the machine's load does not move.
 */
export const CALLGRIND_DIR = process.env.BENCH_CALLGRIND ?? null;

/** `node`: the runtime to run it on (this process's by default). */
export function start(name: string, args: string[], env: Record<string, string>, callgrind = false, node = process.execPath): ChildProcess {
  const [command, argv] =
    callgrind && CALLGRIND_DIR !== null
      ? [
          'valgrind',
          [
            '--tool=callgrind',
            `--callgrind-out-file=${CALLGRIND_DIR}/${name}.%p`,
            ...(process.env.BENCH_CALLGRIND_THREADS ? ['--separate-threads=yes'] : []),
            node,
            ...args,
          ],
        ]
      : [node, args];
  // BENCH_VERBOSE: the children's output, stdout too (e.g. V8's --trace-gc lines), each line named.
  const verbose = Boolean(process.env.BENCH_VERBOSE);
  const child = spawn(command, argv, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', verbose ? 'pipe' : 'ignore', 'pipe'],
  });
  const relay = (d: Buffer) => {
    if (verbose) process.stderr.write(`[${name}] ${d.toString()}`);
  };
  child.stdout?.on('data', relay);
  child.stderr?.on('data', relay);
  children.push(child);
  return child;
}

export async function ready(url: string, timeoutMs = 30_000): Promise<void> {
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

export async function json<T>(res: Response): Promise<T> {
  if (res.status >= 300) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

/**
 * CPU time of a process so far, in ms: the time each of its threads has run, in nanoseconds
 * (`/proc/<pid>/task/<tid>/schedstat`, the scheduler's own clock), summed. `/proc/<pid>/stat`'s user and system
 * times come in ticks of 10 ms, too coarse for a round of a few hundred ms split over a process and its database
 * backends; they are the fallback where schedstat is missing. The service's threads (the main one, V8's and
 * libuv's pools) live as long as the process, so none of their time leaves the sum between two readings.
 */
export function cpuMs(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        /* the thread ended between the listing and the read */
      }
    }
    return ns / 1e6;
  } catch {
    return ticksMs(pid, false);
  }
}

/** The kernel's share of a process's CPU so far, in ms (`/proc/<pid>/stat`'s system time, in 10 ms ticks). */
export function kernelCpuMs(pid: number | undefined): number {
  return pid ? ticksMs(pid, true) : 0;
}

function ticksMs(pid: number, systemOnly: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), counted after the command name; 100 ticks a second.
    return (((systemOnly ? 0 : Number(fields[11])) + Number(fields[12])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/**
 * CPU time so far, in ms, of each PostgreSQL backend serving a database (not the server's shared processes:
 * WAL writer, checkpointer), optionally only those of one client (`applicationName`, a LIKE pattern: the app's
 * pool names itself `cws-connect…`). Compare two snapshots with `databaseCpuSince`.
 */
export async function databaseCpu(client: pg.Client, database: string, applicationName = '%'): Promise<Map<number, number>> {
  const r = await client.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE $2 AND pid <> pg_backend_pid()',
    [database, applicationName],
  );
  return new Map(r.rows.map((row) => [row.pid, cpuMs(row.pid)]));
}

/** The backends' CPU ms between two snapshots (a backend opened meanwhile counts from zero). */
export function databaseCpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let ms = 0;
  for (const [pid, now] of after) ms += now - (before.get(pid) ?? 0);
  return ms;
}

/** Transactions committed in a database so far (the statistics lag by up to PGSTAT's flush interval). */
export async function transactions(databaseUrl: string): Promise<number> {
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

/**
 * The most operations per second that the measured CPU costs allow on this machine: every core busy (the
 * CPU of all processes per operation spread over the cores), and no single-threaded process past one core
 * (a Node server's work runs on its main thread). A closed loop of requests that stays below it is held by
 * waits (a commit's round trip, a process waiting for a core), not by work. `singleThreaded` names the
 * entries of `cpuUsPerOp` that are one such process each.
 */
export function cpuBoundRate(cpuUsPerOp: Record<string, number>, singleThreaded: string[], cores = availableParallelism()): number {
  const total = Object.values(cpuUsPerOp).reduce((a, b) => a + b, 0);
  const busiest = Math.max(0, ...singleThreaded.map((k) => cpuUsPerOp[k] ?? 0));
  return Math.min((cores * 1e6) / total, busiest > 0 ? 1e6 / busiest : Number.POSITIVE_INFINITY);
}

/** The upstream delivery the inbound benchmarks send and store (a 254-byte JSON body). */
export const DELIVERY_BODY = JSON.stringify({
  id: 'dlv_00000000-0000-4000-8000-000000000000',
  event: 'workflow_step_updated',
  occurredAt: '2026-11-23T12:00:00.000Z',
  companyId: 'acme',
  workflowId: 'wf_1',
  transition: 'Review',
  workflow: { id: 'wf_1', name: 'NDA', step: 'Review', versionNumber: 1 },
});

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export interface Stack {
  databaseUrl: string;
  appUrl: string;
  sandboxUrl: string;
  operatorKey: string;
  appProc: ChildProcess;
  sandboxProc: ChildProcess;
  /** Creates a tenant with a tenant key and `u-alice` connected as the sandbox's alice; returns the key. */
  tenant(id: string): Promise<string>;
  /** An access token of a sandbox user, straight from the sandbox (for baselines). */
  tokenOf(user: string): Promise<string>;
  /**
   * One more instance of the app on the same database and sandbox, ready, on `node` (this process's runtime by
   * default) with `nodeArgs` (V8 flags, as NODE_OPTIONS would give them); its URL and process. The stack stops
   * it with the rest.
   */
  startApp(nodeArgs?: string[], node?: string): Promise<{ url: string; proc: ChildProcess }>;
}

/** Builds the app (unless BENCH_SKIP_BUILD), runs `body` against a fresh stack, and tears everything down. */
export async function withStack(appEnv: Record<string, string>, body: (stack: Stack) => Promise<void>): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) buildApp(); // the same build as `npm start` (SWC; nothing to do when nothing changed)
  await withScratchDatabase('cws_bench', async (databaseUrl) => {
    try {
      await body(await startStack(databaseUrl, appEnv));
    } finally {
      for (const c of children) c.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 500));
    }
  });
}

/**
 * Runs `body` on a database of its own on DATABASE_URL's server (named `<prefix>_<pid>_<random>`), dropped after;
 * `admin` is a client of the server's `postgres` database.
 */
export async function withScratchDatabase(prefix: string, body: (url: string, admin: pg.Client) => Promise<void>): Promise<void> {
  const name = `${prefix}_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  try {
    await body(withDatabase(SERVER_URL, name), admin);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

/** Exits with the benchmark's outcome; children are killed on failure. */
export function finish(run: Promise<void>): void {
  run.then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      for (const c of children) c.kill('SIGKILL');
      process.exit(1);
    },
  );
}

async function startStack(databaseUrl: string, extraEnv: Record<string, string>): Promise<Stack> {
  const [sandboxPort, appPort] = [await freePort(), await freePort()];
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
  const appUrl = `http://127.0.0.1:${appPort}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const operatorKey = `cwsop_bench_${randomBytes(24).toString('base64url')}`;

  const sandboxProc = start('sandbox', ['--import', 'tsx', 'packages/cws-sandbox/src/standalone.ts'], {
    SANDBOX_PORT: String(sandboxPort),
    SANDBOX_CLIENT_ID: 'bench',
    SANDBOX_CLIENT_SECRET: clientSecret,
    SANDBOX_REDIRECT_URIS: `${appUrl}/oauth/callback`,
    SANDBOX_RECORD_LIMIT: '0',
  });
  await ready(`${sandboxUrl}/_sandbox/users`);
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  // BENCH_NODE_ARGS: extra node flags for the app, e.g. --perf-basic-prof for `perf record -p <pid>`.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
  const appEnv = (port: number): Record<string, string> => ({
    NODE_ENV: 'production',
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: databaseUrl,
    SANDBOX: 'off',
    VAULT_KEYS: vaultKeys,
    OPERATOR_API_KEY: operatorKey,
    CWS_SANDBOX_AUTH_URL: sandboxUrl,
    CWS_SANDBOX_CLIENT_ID: 'bench',
    CWS_SANDBOX_CLIENT_SECRET: clientSecret,
    CWS_SANDBOX_SCOPES: 'workflows.read workflows.write webhooks.manage userinfo.read',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    ...extraEnv,
  });
  const appProc = start('app', [...profile, ...nodeArgs, 'dist/src/main.js'], appEnv(appPort), true);
  await ready(`${appUrl}/health/ready`, CALLGRIND_DIR === null ? 30_000 : 600_000);

  const op = { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' };
  return {
    databaseUrl,
    appUrl,
    sandboxUrl,
    operatorKey,
    appProc,
    sandboxProc,
    async tenant(id: string): Promise<string> {
      await json(
        await fetch(`${appUrl}/v1/tenants`, {
          method: 'POST',
          headers: op,
          body: JSON.stringify({ id, name: id, environment: 'sandbox', allowedReturnUrls: ['http://localhost:5173/'] }),
        }),
      );
      const { key } = await json<{ key: string }>(
        await fetch(`${appUrl}/v1/tenants/${id}/api-keys`, { method: 'POST', headers: op, body: '{}' }),
      );
      const { connectUrl } = await json<{ connectUrl: string }>(
        await fetch(`${appUrl}/v1/tenants/${id}/connect-sessions`, {
          method: 'POST',
          headers: op,
          body: JSON.stringify({ kind: 'user', userId: 'u-alice', returnUrl: 'http://localhost:5173/done' }),
        }),
      );
      const back = await openCallback(await authorizeAtSandbox(connectUrl, 'alice', 'approve'));
      if (new URL(back.headers.get('location') ?? 'x:/').searchParams.get('status') !== 'connected')
        throw new Error(`connecting alice to ${id} failed`);
      return key;
    },
    async tokenOf(user: string): Promise<string> {
      const { access_token: token } = await json<{ access_token: string }>(
        await fetch(`${sandboxUrl}/_sandbox/tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ userId: user }),
        }),
      );
      return token;
    },
    async startApp(nodeArgs: string[] = [], node = process.execPath) {
      const port = await freePort();
      const proc = start(`app-${port}`, [...nodeArgs, 'dist/src/main.js'], appEnv(port), false, node);
      const url = `http://127.0.0.1:${port}`;
      await ready(`${url}/health/ready`, 120_000);
      return { url, proc };
    },
  };
}

/**
 * Instructions per request of a process started with `start(..., true)` under BENCH_CALLGRIND: its counters are
 * zeroed after a warm-up, `requests` calls are made, and the counts collected since are dumped and read.
 */
export async function callgrindInstructions(pid: number, requests: number, send: (n: number) => Promise<void>): Promise<number> {
  if (CALLGRIND_DIR === null) throw new Error('BENCH_CALLGRIND is not set');
  // Warm-up (BENCH_WARMUP): the JIT's tiers are reached by call counts, not by time; too short a one leaves V8's
  // compiler threads and unoptimized code in the count, which then moves by tens of thousands between runs.
  await send(Number(process.env.BENCH_WARMUP ?? Math.max(500, requests / 5)));
  execFileSync('callgrind_control', ['--zero', String(pid)], { stdio: 'ignore' });
  await send(requests);
  execFileSync('callgrind_control', ['--dump', String(pid)], { stdio: 'ignore' });
  const dumps = readdirSync(CALLGRIND_DIR)
    .filter((f) => f.includes(`.${pid}.`))
    .map((f) => join(CALLGRIND_DIR, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  // BENCH_CALLGRIND_THREADS: one file per thread of the same dump (`<name>.<pid>.<dump>-<thread>`), summed; the main thread's printed.
  const dump = dumps[0].replace(/-\d+$/, '');
  let total = 0;
  for (const file of dumps.filter((f) => f === dump || f.startsWith(`${dump}-`))) {
    const totals = /^(?:totals|summary):\s+(\d+)/m.exec(readFileSync(file, 'utf8'));
    if (!totals) throw new Error(`no totals in ${file}`);
    total += Number(totals[1]);
    if (file.endsWith('-01'))
      console.log(`  main thread ${Math.round(Number(totals[1]) / requests).toLocaleString('en')} instructions per request (${file})`);
  }
  return total / requests;
}

/**
 * The heaviest self-time items of the V8 CPU profiles in `dir` (written by BENCH_PROFILE runs when the app
 * exits), each with its share of the sampled time: what holds a missed goal. `cpuUsPerOp` (the app's CPU per
 * operation in the run) turns a share into µs per operation; the profile covers the whole run, set-up included
 * (module loading, the app's start-up, is left out).
 */
/** Native functions a profile shows only while modules load (start-up). */
const STARTUP_NATIVES = new Set([
  'wrapSafe',
  'compileSourceTextModule',
  'compileFunction',
  'internalModuleStat',
  'readFileUtf8',
  'openFileHandle',
  'fstat',
  'realpathSync',
  'lstat',
]);

export function profileTop(dir: string, cpuUsPerOp: number, n = 12): string[] {
  const self = new Map<string, number>();
  let total = 0;
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
      nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
      samples: number[];
    };
    const byId = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
    for (const id of profile.samples) {
      const f = byId.get(id);
      if (!f || f.functionName === '(idle)' || f.functionName === '(program)') continue;
      // The app's start-up (loading and compiling modules) is in the profile too, and is not an operation's cost.
      if (f.url.startsWith('node:internal/modules/') || (f.url === '' && STARTUP_NATIVES.has(f.functionName))) continue;
      const where = f.url ? `${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, '')}:${f.lineNumber + 1}` : '';
      const key = `${f.functionName || '(anonymous)'} ${where}`.trim();
      self.set(key, (self.get(key) ?? 0) + 1);
      total++;
    }
  }
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((100 * v) / total).toFixed(1).padStart(5)} %  ~${((cpuUsPerOp * v) / total).toFixed(1).padStart(5)} µs/op  ${k}`);
}
