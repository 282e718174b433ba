// An agent's tool call against the same facade call, in the same run: CPU per operation of the service process
// and its PostgreSQL backends, and what tools/list costs (answered from memory).
//   npx tsx bench/agents.ts            (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (5), BENCH_SECONDS (5), BENCH_CONNECTIONS (20), BENCH_SKIP_BUILD=1, BENCH_VERBOSE=1,
// BENCH_PROFILE=<dir> (a CPU profile of the app; with BENCH_ONLY=<mode> the rounds run that mode alone).
// The sandbox and the compiled app run in their own processes (bench/harness.ts); autocannon runs here. Not part of `npm test`.
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { cpuMs, databaseCpu, databaseCpuSince, finish, json, median, profileTop, withStack, type Stack } from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);

/** Goal of a tools/call against the facade call it makes (the issue): CPU per operation, app and its database backends. */
const CPU_GOAL = 1.3;

interface Mode {
  mode: string;
  /** Answers a tool error on purpose (the floor below). */
  toolError?: boolean;
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

const rpc = (method: string, params: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });

/** The app's CPU per operation of the first mode run, for the profile's µs per item. */
let profiledCpuUs = 0;
/** Settles when the app has exited (and so written its profile). */
let appExited: Promise<unknown> = Promise.resolve();

async function run(stack: Stack): Promise<void> {
  const { appUrl, databaseUrl, appProc, operatorKey } = stack;
  appExited = new Promise((resolve) => appProc.once('exit', resolve));
  const key = await stack.tenant('bench');
  const session = await json<{ token: string; mcpUrl: string }>(
    await fetch(`${appUrl}/v1/tenants/bench/agent-sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'u-alice', expiresInSeconds: 86400 }),
    }),
  );
  const mcp = {
    authorization: `Bearer ${session.token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  };
  const modes: Mode[] = [
    {
      mode: 'facade GET /workflows',
      url: `${appUrl}/v1/tenants/bench/workflows`,
      method: 'GET',
      headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice', accept: 'application/json' },
    },
    {
      mode: 'tools/call facadeListWorkflows',
      url: `${appUrl}/mcp`,
      method: 'POST',
      headers: mcp,
      body: rpc('tools/call', { name: 'facadeListWorkflows', arguments: {} }),
    },
    // A tool call's floor without its upstream call: the protocol, the grant check and the audit row every call writes.
    {
      mode: 'tools/call outside the grant',
      toolError: true,
      url: `${appUrl}/mcp`,
      method: 'POST',
      headers: mcp,
      body: rpc('tools/call', { name: 'notATool', arguments: {} }),
    },
    { mode: 'tools/list', url: `${appUrl}/mcp`, method: 'POST', headers: mcp, body: rpc('tools/list', {}) },
    // The protocol's floor: the session token, the SDK's server and transport, and nothing else.
    { mode: 'ping', url: `${appUrl}/mcp`, method: 'POST', headers: mcp, body: rpc('ping', {}) },
  ];
  for (const m of modes) {
    const res = await fetch(m.url, { method: m.method, headers: m.headers, body: m.body });
    const text = await res.text();
    if (res.status !== 200 || text.includes('"isError":true') !== (m.toolError ?? false))
      throw new Error(`${m.mode} answered ${res.status}: ${text.slice(0, 300)}`);
  }
  const only = process.env.BENCH_ONLY;
  if (only !== undefined) modes.splice(0, modes.length, ...modes.filter((m) => m.mode.startsWith(only)));
  console.log(`${CONNECTIONS} connections, ${ROUNDS} rounds x ${SECONDS} s per mode, alternating\n`);
  for (const m of modes) await autocannon({ ...m, connections: CONNECTIONS, duration: 2 }); // warm-up

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const database = new URL(databaseUrl).pathname.slice(1);
  const rows = new Map<string, Array<{ rps: number; cpuUs: number; dbUs: number; failed: number }>>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const m of modes) {
      const dbBefore = await databaseCpu(db, database, 'cws-connect%');
      const cpuBefore = cpuMs(appProc.pid);
      const r: Result = await autocannon({ ...m, connections: CONNECTIONS, duration: SECONDS });
      const n = Math.max(1, r.requests.total);
      const row = {
        rps: r.requests.average,
        cpuUs: ((cpuMs(appProc.pid) - cpuBefore) * 1000) / n,
        dbUs: (databaseCpuSince(dbBefore, await databaseCpu(db, database, 'cws-connect%')) * 1000) / n,
        failed: r.non2xx + r.errors + r.timeouts,
      };
      console.log(
        `round ${round}  ${m.mode.padEnd(32)} ${row.rps.toFixed(0).padStart(6)} op/s  app CPU ${row.cpuUs.toFixed(0)} µs/op + database backends ${row.dbUs.toFixed(1)}${row.failed ? `  (${row.failed} failed)` : ''}`,
      );
      rows.set(m.mode, [...(rows.get(m.mode) ?? []), row]);
    }
  }
  await db.end();

  console.log('\n| operation (median of rounds) | op/s | app CPU µs/op | database backends µs/op | failed |');
  console.log('|---|---:|---:|---:|---:|');
  for (const m of modes) {
    const r = rows.get(m.mode) ?? [];
    console.log(
      `| ${m.mode} | ${median(r.map((x) => x.rps)).toFixed(0)} | ${median(r.map((x) => x.cpuUs)).toFixed(0)} | ${median(r.map((x) => x.dbUs)).toFixed(1)} | ${r.reduce((s, x) => s + x.failed, 0)} |`,
    );
  }
  profiledCpuUs = median((rows.get(modes[0].mode) ?? []).map((x) => x.cpuUs));
  if (only !== undefined) return;
  // Per round: the tool call's CPU (app + database) over the facade call's just before it (the machine's load moves between rounds).
  const facade = rows.get(modes[0].mode) ?? [];
  const call = rows.get(modes[1].mode) ?? [];
  const floor = rows.get(modes[2].mode) ?? [];
  const list = rows.get(modes[3].mode) ?? [];
  const ratios = call.map((c, i) => (c.cpuUs + c.dbUs) / (facade[i].cpuUs + facade[i].dbUs));
  const ratio = median(ratios);
  console.log(`\nper round, tools/call / facade CPU: ${ratios.map((r) => r.toFixed(2)).join(' ')}`);
  const floorRatio = median(floor.map((f, i) => (f.cpuUs + f.dbUs) / (facade[i].cpuUs + facade[i].dbUs)));
  console.log(
    `floor: a tools/call with no upstream call (the protocol and its audit row) costs ${floorRatio.toFixed(2)}x the facade call, before the upstream call it makes`,
  );
  console.log(
    `tools/list: ${median(list.map((x) => x.cpuUs)).toFixed(0)} µs/op of app CPU, ${median(list.map((x) => x.dbUs)).toFixed(1)} µs/op in the database (answered from memory: no upstream call)`,
  );
  console.log(`RESULT tools/call / facade CPU: ${ratio.toFixed(2)} (goal <= ${CPU_GOAL}: ${ratio <= CPU_GOAL ? 'met' : 'MISSED'})`);
}

async function printProfile(): Promise<void> {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return;
  await Promise.race([appExited, new Promise((r) => setTimeout(r, 15_000))]);
  console.log(`\nheaviest self-time items of the app's profile (${dir}), share of its samples and µs of an operation:`);
  for (const line of profileTop(dir, profiledCpuUs)) console.log(`  ${line}`);
}

finish(withStack({}, run).then(printProfile));
