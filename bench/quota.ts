// What a company's upstream budget costs a facade call (docs/quotas.md), measured in the same run as a call without one.
//   npx tsx bench/quota.ts            (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (10), BENCH_SECONDS (3), BENCH_CONNECTIONS (50), BENCH_SKIP_BUILD=1, BENCH_VERBOSE=1, BENCH_CHECKS (2000000),
// BENCH_CALLGRIND=<dir> (instructions per call of the app under valgrind's callgrind, with and without a budget, instead of
// the rounds: a figure the machine's load does not move; BENCH_REQUESTS, 3000).
// Two parts: the check alone in this process (QuotaService.take, its leases answered at once), CPU per call; then the
// compiled app with two tenants of one environment, one with a budget (`read=1000000000/1h`, never spent) and one
// without, called in alternating rounds: CPU per call of the app and its PostgreSQL backends, and the database
// transactions each needed (leases and the figures saved every second; none per call). Not part of `npm test`.
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { parseBudget, type Budget } from '../src/config/quota-budgets.js';
import type { ChangeFeed } from '../src/changes/change-feed.service.js';
import { SystemClock } from '../src/common/clock.js';
import type { AppConfig } from '../src/config/app-config.js';
import { QuotaMetrics } from '../src/quota/quota-metrics.js';
import type { QuotaWindowsRepository } from '../src/quota/quota-windows.repository.js';
import { QuotaService } from '../src/quota/quota.service.js';
import type { LeaseAnswer } from '../src/quota/window-host.js';
import { MetricsService } from '../src/telemetry/metrics.service.js';
import {
  CALLGRIND_DIR,
  callgrindInstructions,
  cpuMs,
  databaseCpu,
  databaseCpuSince,
  finish,
  json,
  median,
  transactions,
  withStack,
  type Stack,
} from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const CHECKS = Number(process.env.BENCH_CHECKS ?? 2_000_000);

/** Goals (the issue): the check alone, µs of CPU per call; a facade call with a budget over one without, CPU. */
const CHECK_GOAL_US = 5;
const CPU_GOAL = 1.05;

/** The check alone: QuotaService.take on the interactive lane (metrics included), its leases answered at once (no database). */
async function checkAlone(): Promise<number> {
  let leases = 0;
  const repo = {
    lease: (_t: string, _c: string, _log: unknown, _lane: unknown, want: number): Promise<LeaseAnswer> => {
      leases++;
      return Promise.resolve({ units: want, bucket: 0, waitMs: 0, pausedUntil: null });
    },
    giveBack: () => Promise.resolve(),
    report: () => Promise.resolve(),
  } as unknown as QuotaWindowsRepository;
  const config = { quota: { maxWaitMs: 250 } } as AppConfig;
  const feed = { subscribe: () => undefined } as unknown as ChangeFeed;
  const quota = new QuotaService(config, new SystemClock(), repo, new QuotaMetrics(new MetricsService()), feed);
  const budget = parseBudget('1000000000/1h') as Budget;
  let waited = 0;
  const run = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const wait = quota.take('bench', 'read', budget, 'interactive');
      if (wait !== null) {
        waited++;
        await wait;
      }
    }
  };
  await run(CHECKS / 10); // warm-up: the JIT's tiers
  const before = process.cpuUsage();
  await run(CHECKS);
  const used = process.cpuUsage(before);
  await quota.onModuleDestroy();
  const us = (used.user + used.system) / CHECKS;
  console.log(
    `the check alone: ${CHECKS.toLocaleString('en')} calls, ${us.toFixed(3)} µs of CPU per call (goal <= ${CHECK_GOAL_US}: ${us <= CHECK_GOAL_US ? 'met' : 'MISSED'}); ` +
      `${leases} leases, ${waited} calls waited for one`,
  );
  return us;
}

interface Row {
  rps: number;
  cpuUs: number;
  dbUs: number;
  transactions: number;
  requests: number;
  failed: number;
}

async function run(stack: Stack): Promise<void> {
  const { appUrl, databaseUrl, appProc, operatorKey } = stack;
  const keys = { 'no budget': await stack.tenant('free'), budget: await stack.tenant('budgeted') };
  await json(
    await fetch(`${appUrl}/v1/tenants/budgeted`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ quotas: { read: '1000000000/1h' } }),
    }),
  );
  const modes = (Object.keys(keys) as Array<keyof typeof keys>).map((mode) => ({
    mode,
    url: `${appUrl}/v1/tenants/${mode === 'budget' ? 'budgeted' : 'free'}/workflows`,
    headers: { authorization: `Bearer ${keys[mode]}`, 'x-user-id': 'u-alice', accept: 'application/json' },
  }));
  if (CALLGRIND_DIR !== null) return countInstructions(modes, appProc.pid);
  for (const m of modes) await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: 2 }); // warm-up
  console.log(`\n${CONNECTIONS} connections, ${ROUNDS} rounds x ${SECONDS} s per mode, alternating (ABBA: each pair in turn first)`);

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const database = new URL(databaseUrl).pathname.slice(1);
  const rows = new Map<string, Row[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    // The machine's load drifts: the mode that goes first alternates, so a drift weighs on both alike.
    for (const m of round % 2 === 1 ? modes : [...modes].reverse()) {
      const txBefore = await transactions(databaseUrl);
      const dbBefore = await databaseCpu(db, database, 'cws-connect%');
      const cpuBefore = cpuMs(appProc.pid);
      const r: Result = await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: SECONDS });
      const requests = Math.max(1, r.requests.total);
      const row: Row = {
        rps: r.requests.average,
        cpuUs: ((cpuMs(appProc.pid) - cpuBefore) * 1000) / requests,
        dbUs: (databaseCpuSince(dbBefore, await databaseCpu(db, database, 'cws-connect%')) * 1000) / requests,
        // The two statistics reads of transactions() are transactions too.
        transactions: (await transactions(databaseUrl)) - txBefore - 1,
        requests,
        failed: r.non2xx + r.errors + r.timeouts,
      };
      console.log(
        `round ${round}  ${m.mode.padEnd(9)} ${row.rps.toFixed(0).padStart(6)} req/s  app CPU ${row.cpuUs.toFixed(1)} µs/call + database backends ${row.dbUs.toFixed(1)}  ` +
          `transactions ${row.transactions} (${((1000 * row.transactions) / requests).toFixed(2)} per 1000 calls)${row.failed ? `  (${row.failed} failed)` : ''}`,
      );
      rows.set(m.mode, [...(rows.get(m.mode) ?? []), row]);
    }
  }
  await db.end();
  const free = rows.get('no budget') ?? [];
  const budget = rows.get('budget') ?? [];
  // Per round: the budget's round over the round without one just before it (the machine's load moves between rounds).
  const ratios = budget.map((b, i) => (b.cpuUs + b.dbUs) / (free[i].cpuUs + free[i].dbUs));
  const ratio = median(ratios);
  const perCall = (list: Row[]) => median(list.map((r) => r.cpuUs + r.dbUs));
  const txPer1000 = (list: Row[]) => (1000 * list.reduce((n, r) => n + r.transactions, 0)) / list.reduce((n, r) => n + r.requests, 0);
  console.log(`\nper round, budget / no budget CPU (app + database backends): ${ratios.map((r) => r.toFixed(3)).join(' ')}`);
  console.log(
    `CPU µs per call (median): budget ${perCall(budget).toFixed(1)}, no budget ${perCall(free).toFixed(1)}; ` +
      `database transactions per 1000 calls: budget ${txPer1000(budget).toFixed(2)}, no budget ${txPer1000(free).toFixed(2)}`,
  );
  console.log(
    `RESULT quota: facade CPU with a budget / without ${ratio.toFixed(3)} (goal <= ${CPU_GOAL}: ${ratio <= CPU_GOAL ? 'met' : 'MISSED'})`,
  );
}

/** Instructions per call of the app (under callgrind) with and without a budget: BENCH_REQUESTS calls each, 10 connections, twice. */
async function countInstructions(modes: Array<{ mode: string; url: string; headers: Record<string, string> }>, pid = 0): Promise<void> {
  const requests = Number(process.env.BENCH_REQUESTS ?? 3000);
  const counts: number[] = [];
  // Each mode twice, alternating, and the second pair compared: the first mode measured also pays for the JIT's
  // tiers the second finds reached (a single pair once read 0.59).
  for (const m of [...modes, ...modes]) {
    const send = async (amount: number) => {
      const r = await autocannon({ url: m.url, headers: m.headers, connections: 10, amount, timeout: 60 });
      if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${m.mode}: ${r.non2xx + r.errors + r.timeouts} failed calls`);
    };
    counts.push(await callgrindInstructions(pid, requests, send));
    console.log(`${m.mode.padEnd(9)} ${Math.round(counts.at(-1) ?? 0).toLocaleString('en')} instructions per call (${requests} calls)`);
  }
  const ratio = counts[3] / counts[2];
  console.log(
    `RESULT quota: instructions per facade call, budget / no budget ${ratio.toFixed(3)} (goal <= ${CPU_GOAL}: ${ratio <= CPU_GOAL ? 'met' : 'MISSED'})`,
  );
}

async function main(): Promise<void> {
  await checkAlone();
  // Under callgrind the app runs tens of times slower: a lease may take longer than a call may wait by default.
  await withStack(CALLGRIND_DIR === null ? {} : { QUOTA_MAX_WAIT_MS: '10000' }, run);
}

finish(main());
