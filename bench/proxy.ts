// The facade's overhead, measured against a bare pass-through proxy in the same run.
//   npx tsx bench/proxy.ts            (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (5), BENCH_SECONDS (5), BENCH_CONNECTIONS (50), BENCH_LOG_LEVEL (info), BENCH_SKIP_BUILD=1,
// BENCH_PROFILE=<dir> (a CPU profile of the app), BENCH_VERBOSE=1 (children's stderr),
// BENCH_CALLGRIND=<dir> (instructions per request of both proxies under valgrind's callgrind, instead of the rounds; BENCH_REQUESTS, BENCH_WARMUP, BENCH_CALLGRIND_THREADS=1),
// BENCH_TRACING=1 (the app exports traces over OTLP/HTTP protobuf to a sink in this process, which reads and drops them).
// Each server runs in its own process: the sandbox, the bare proxy, the app (compiled: NestJS needs
// decorator metadata, which tsx does not emit). autocannon runs here. Not part of `npm test`.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { freePort } from '../src/common/free-port.js';
import {
  CALLGRIND_DIR,
  callgrindInstructions,
  cpuMs,
  databaseCpu,
  databaseCpuSince,
  finish,
  json,
  median,
  profileTop,
  ready,
  start,
  transactions,
  withStack,
  type Stack,
} from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

interface Row {
  mode: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** CPU time of the serving process (the proxy, or the sandbox when called directly) per request. */
  cpuUs: number;
  /** CPU time of the app's PostgreSQL backends per request (the facade only: the others have none). */
  dbUs: number;
}

/** Goals of the facade against the bare proxy (issue 24): CPU per request (app + its database backends), p99. */
const CPU_GOAL = 1.2;
const P99_GOAL = 1.15;

/** The facade's CPU per request in the last run, for the profile's µs per item. */
let facadeCpuUs = 0;
/** Settles when the app has exited (and so written its profile). */
let appExited: Promise<unknown> = Promise.resolve();

async function run(stack: Stack): Promise<void> {
  const { appUrl, sandboxUrl, databaseUrl, appProc, sandboxProc } = stack;
  appExited = new Promise((resolve) => appProc.once('exit', resolve));
  const barePort = await freePort();
  // A tenant, its key, alice connected through the real OAuth flow; a token of alice's for the baselines.
  const key = await stack.tenant('bench');
  const token = await stack.tokenOf('alice');
  for (let i = 0; i < 5; i++) {
    await json(
      await fetch(`${sandboxUrl}/workflows`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `Bench contract ${i}`, approvers: ['bob'] }),
      }),
    );
  }
  const bareProc = start(
    'bare',
    ['--import', 'tsx', 'bench/bare-proxy.ts'],
    { TARGET: sandboxUrl, TOKEN: token, PORT: String(barePort) },
    true,
  );
  await ready(`http://127.0.0.1:${barePort}/workflows`, CALLGRIND_DIR === null ? 30_000 : 600_000);

  // `pid`: the proxy whose CPU time per request is reported (none for the direct calls).
  const modes: Array<{ mode: string; url: string; headers: Record<string, string>; pid?: number }> = [
    {
      mode: 'sandbox (direct)',
      url: `${sandboxUrl}/workflows`,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      pid: sandboxProc.pid,
    },
    // The same request as the facade's, key and user included (the floor replaces the one and passes the other on).
    {
      mode: 'bare proxy',
      url: `http://127.0.0.1:${barePort}/workflows`,
      headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice', accept: 'application/json' },
      pid: bareProc.pid,
    },
    {
      mode: 'facade',
      url: `${appUrl}/v1/tenants/bench/workflows`,
      headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice', accept: 'application/json' },
      pid: appProc.pid,
    },
  ];
  const sample = await fetch(modes[2].url, { headers: modes[2].headers });
  const body = await sample.text();
  if (sample.status !== 200) throw new Error(`the facade answered ${sample.status}: ${body}`);
  if (CALLGRIND_DIR !== null) return countInstructions(modes.slice(1));
  console.log(
    `GET /workflows answers ${body.length} bytes; ${CONNECTIONS} connections, ${ROUNDS} rounds x ${SECONDS} s per mode, alternating\n`,
  );

  for (const m of modes) await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: 2 }); // warm-up
  const results = new Map<string, Row[]>();
  let dbTransactions = 0;
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const database = new URL(databaseUrl).pathname.slice(1);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const m of modes) {
      const facade = m.mode === 'facade';
      const before = facade ? await transactions(databaseUrl) : 0;
      const dbBefore = facade ? await databaseCpu(db, database, 'cws-connect%') : null;
      const cpuBefore = cpuMs(m.pid);
      const r: Result = await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: SECONDS });
      const cpuUs = ((cpuMs(m.pid) - cpuBefore) * 1000) / Math.max(1, r.requests.total);
      const dbUs = dbBefore
        ? (databaseCpuSince(dbBefore, await databaseCpu(db, database, 'cws-connect%')) * 1000) / Math.max(1, r.requests.total)
        : 0;
      if (facade) dbTransactions += (await transactions(databaseUrl)) - before - 1;
      const row = {
        mode: m.mode,
        rps: r.requests.average,
        p50: r.latency.p50,
        p99: r.latency.p99,
        non2xx: r.non2xx + r.errors + r.timeouts,
        cpuUs,
        dbUs,
      };
      console.log(
        `round ${round}  ${m.mode.padEnd(18)} ${row.rps.toFixed(0).padStart(7)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  server CPU ${cpuUs.toFixed(0)} µs/req${facade ? ` + database backends ${dbUs.toFixed(1)}` : ''}${row.non2xx ? `  (${row.non2xx} failed)` : ''}`,
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
      dbUs: median(rows.map((r) => r.dbUs)),
      failed: rows.reduce((n, r) => n + r.non2xx, 0),
    };
  });
  console.log('\n| path (median of rounds) | req/s | p50 ms | p99 ms | serving process CPU µs/req | failed |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const s of summary) console.log(`| ${s.mode} | ${s.rps.toFixed(0)} | ${s.p50} | ${s.p99} | ${s.cpuUs.toFixed(0)} | ${s.failed} |`);
  const bare = summary[1];
  const facade = summary[2];
  // Per round: the facade's round against the bare proxy's just before it (the machine's load moves between rounds).
  const bareRows = results.get('bare proxy') ?? [];
  const facadeRows = results.get('facade') ?? [];
  const rpsRatios = facadeRows.map((f, i) => f.rps / bareRows[i].rps);
  const p99Ratios = facadeRows.map((f, i) => f.p99 / Math.max(1, bareRows[i].p99));
  await db.end();
  facadeCpuUs = facade.cpuUs;
  // Per round as well: CPU of the facade (app + its database backends) over the bare proxy's just before it.
  const cpuRatios = facadeRows.map((f, i) => (f.cpuUs + f.dbUs) / bareRows[i].cpuUs);
  const cpuRatio = median(cpuRatios);
  const p99Ratio = median(p99Ratios);
  console.log(`\ndatabase transactions committed during the facade rounds: ${dbTransactions} (the hot path needs none)`);
  console.log(`per round, facade / bare proxy req/s: ${rpsRatios.map((r) => r.toFixed(2)).join(' ')}`);
  console.log(`per round, facade / bare proxy p99:   ${p99Ratios.map((r) => r.toFixed(2)).join(' ')}`);
  console.log(`per round, facade / bare proxy CPU:   ${cpuRatios.map((r) => r.toFixed(2)).join(' ')}`);
  console.log(
    `CPU µs per request (median): facade ${facade.cpuUs.toFixed(0)} + its database backends ${facade.dbUs.toFixed(1)}, bare proxy ${bare.cpuUs.toFixed(0)}`,
  );
  console.log(`facade / bare proxy throughput: ${median(rpsRatios).toFixed(2)} (median of ${ROUNDS} rounds)`);
  const verdict = (ratio: number, goal: number) => (ratio <= goal ? 'met' : 'MISSED');
  console.log(
    `RESULT facade floor: CPU ${cpuRatio.toFixed(2)} (goal <= ${CPU_GOAL}: ${verdict(cpuRatio, CPU_GOAL)})   p99 ${p99Ratio.toFixed(2)} (goal <= ${P99_GOAL}: ${verdict(p99Ratio, P99_GOAL)})`,
  );
  if (cpuRatio > CPU_GOAL || p99Ratio > P99_GOAL)
    console.log(
      process.env.BENCH_PROFILE
        ? 'held by: the profile of the app (its heaviest self-time items, printed after the run)'
        : 'held by: run again with BENCH_PROFILE=<dir> to print the profile items that hold it (docs/benchmarks.md names them for the last recorded run)',
    );
}

/**
 * BENCH_CALLGRIND=<dir>: instructions per request of the bare proxy and of the app, both under callgrind, for
 * BENCH_REQUESTS (3000) calls each at 10 connections: a figure the machine's load does not move.
 */
async function countInstructions(
  modes: Array<{ mode: string; url: string; headers: Record<string, string>; pid?: number }>,
): Promise<void> {
  const requests = Number(process.env.BENCH_REQUESTS ?? 3000);
  const counts: number[] = [];
  for (const m of modes) {
    const send = async (amount: number) => {
      const r = await autocannon({ url: m.url, headers: m.headers, connections: 10, amount, timeout: 60 });
      if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${m.mode}: ${r.non2xx + r.errors + r.timeouts} failed calls`);
    };
    counts.push(await callgrindInstructions(m.pid ?? 0, requests, send));
    console.log(
      `${m.mode.padEnd(12)} ${Math.round(counts.at(-1) ?? 0).toLocaleString('en')} instructions per request (${requests} requests)`,
    );
  }
  console.log(`instructions per request, facade / bare proxy: ${(counts[1] / counts[0]).toFixed(3)}`);
}

/** An OTLP/HTTP endpoint that accepts every export and keeps only counts (what a collector costs the app is the export itself). */
async function otlpSink(): Promise<{ url: string; exports: () => number; bytes: () => number }> {
  let exports = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exports: () => exports, bytes: () => bytes };
}

async function printProfile(): Promise<void> {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return;
  await Promise.race([appExited, new Promise((r) => setTimeout(r, 15_000))]);
  console.log(`\nheaviest self-time items of the app's profile (${dir}), share of its samples and µs of a facade request:`);
  for (const line of profileTop(dir, facadeCpuUs)) console.log(`  ${line}`);
}

async function main(): Promise<void> {
  if (!process.env.BENCH_TRACING) return withStack({}, run).then(printProfile);
  const sink = await otlpSink();
  console.log(`tracing on: every request traced and exported to an OTLP sink at ${sink.url}\n`);
  await withStack({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_BSP_SCHEDULE_DELAY: '1000' }, run);
  console.log(`OTLP exports received: ${sink.exports()} (${(sink.bytes() / 1e6).toFixed(1)} MB)`);
}

finish(main());
