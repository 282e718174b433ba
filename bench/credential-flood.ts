// Does a flood of wrong API keys from one address cost the right caller at the same address anything? The quiet
// tenant runs a steady GET /workflows with its key; in alternate rounds a flood from the same address (127.0.0.1,
// no proxy) sends wrong keys, a new random one each request, to a tenant route (Nest) and a facade route.
//   npx tsx bench/credential-flood.ts        (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (3), BENCH_SECONDS (5), QUIET_RATE (100 req/s), QUIET_CONNECTIONS (5), FLOOD_CONNECTIONS
// (10 per route), FLOOD_RATE (300 req/s in all, the report's 1,000 wrong keys in a few seconds; 0: as fast as the
// app answers), BENCH_SKIP_BUILD=1. Goal (docs/security.md, "Credential guessing"): no error for the quiet tenant,
// its p99 with the flood at most 2x its p99 alone, and a refused request cheaper than a served one (app CPU).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result } from 'autocannon';
import { cpuMs, finish, median, withStack, type Stack } from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const QUIET_RATE = Number(process.env.QUIET_RATE ?? 100);
const QUIET_CONNECTIONS = Number(process.env.QUIET_CONNECTIONS ?? 5);
const FLOOD_CONNECTIONS = Number(process.env.FLOOD_CONNECTIONS ?? 10);
const FLOOD_RATE = Number(process.env.FLOOD_RATE ?? 300);

interface FloodOutcome {
  status: Record<string, number>;
  errors: number;
}

/** This file run as the flood (its own process: a load generator sharing the bench's event loop would delay the quiet timings). */
async function floodMain(url: string): Promise<void> {
  const result = await autocannon({
    url,
    connections: FLOOD_CONNECTIONS,
    duration: SECONDS,
    ...(FLOOD_RATE > 0 ? { overallRate: FLOOD_RATE / 2 } : {}), // two floods, one per route
    requests: [
      {
        setupRequest: (req) => ({
          ...req,
          headers: { ...req.headers, authorization: `Bearer cwsk_${randomBytes(32).toString('base64url')}` },
        }),
      },
    ],
  });
  const status = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]));
  // The last line of the output (harness.ts prints the runtime first).
  process.stdout.write(`\n${JSON.stringify({ status, errors: result.errors + result.timeouts } satisfies FloodOutcome)}\n`);
}

function flood(url: string): Promise<FloodOutcome> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((done, fail) =>
    execFile(process.execPath, ['--import', 'tsx', self, '--flood', url], { maxBuffer: 1 << 24 }, (err, stdout) =>
      err ? fail(err) : done(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as FloodOutcome),
    ),
  );
}

function quietLoad(url: string, key: string): Promise<Result> {
  return autocannon({
    url,
    headers: { authorization: `Bearer ${key}`, 'x-user-id': 'u-alice', accept: 'application/json' },
    connections: QUIET_CONNECTIONS,
    overallRate: QUIET_RATE,
    duration: SECONDS,
  });
}

async function run(stack: Stack): Promise<void> {
  const quietKey = await stack.tenant('quiet');
  await stack.tenant('other');
  const quietUrl = `${stack.appUrl}/v1/tenants/quiet/workflows`;
  console.log(
    `quiet: GET /workflows at ${QUIET_RATE} req/s over ${QUIET_CONNECTIONS} connections; flood: a new wrong key each request, ` +
      `${FLOOD_RATE > 0 ? `${FLOOD_RATE} req/s` : 'unpaced'} over ${FLOOD_CONNECTIONS} connections to each of two routes, from the same address; ` +
      `${ROUNDS} rounds x ${SECONDS} s, alternating\n`,
  );
  await quietLoad(quietUrl, quietKey); // warm-up

  const alone: number[] = [];
  const crowded: number[] = [];
  const servedCpu: number[] = [];
  const refusedCpu: number[] = [];
  let quietErrors = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    let cpu = cpuMs(stack.appProc.pid);
    const a = await quietLoad(quietUrl, quietKey);
    const aloneCpu = cpuMs(stack.appProc.pid) - cpu;
    alone.push(a.latency.p99);
    servedCpu.push((aloneCpu * 1000) / Math.max(1, a.requests.total));
    quietErrors += a.non2xx + a.errors + a.timeouts;
    console.log(
      `round ${round}  quiet alone      p50 ${a.latency.p50} ms  p99 ${a.latency.p99} ms  errors ${a.non2xx + a.errors + a.timeouts}`,
    );

    cpu = cpuMs(stack.appProc.pid);
    const floods = Promise.all([
      flood(`${stack.appUrl}/v1/tenants/other/connections`),
      flood(`${stack.appUrl}/v1/tenants/other/workflows`),
    ]);
    const c = await quietLoad(quietUrl, quietKey);
    const outcomes = await floods;
    const crowdedCpu = cpuMs(stack.appProc.pid) - cpu;
    crowded.push(c.latency.p99);
    quietErrors += c.non2xx + c.errors + c.timeouts;
    const answered: Record<string, number> = {};
    for (const o of outcomes) for (const [s, n] of Object.entries(o.status)) answered[s] = (answered[s] ?? 0) + n;
    const refused = Object.values(answered).reduce((x, y) => x + y, 0);
    // The flood's share of the app's CPU: what the round cost beyond the quiet requests at their cost alone.
    refusedCpu.push(((crowdedCpu - servedCpu[round - 1] * (c.requests.total / 1000)) * 1000) / Math.max(1, refused));
    console.log(
      `round ${round}  quiet with flood p50 ${c.latency.p50} ms  p99 ${c.latency.p99} ms  errors ${c.non2xx + c.errors + c.timeouts}` +
        `   (flood answered ${refused}: ${Object.entries(answered)
          .map(([s, n]) => `${s} x${n}`)
          .join(', ')})`,
    );
  }
  const quiet = median(alone);
  const noisy = median(crowded);
  console.log(`\nquiet tenant p99 (median of ${ROUNDS} rounds): alone ${quiet} ms, during the flood ${noisy} ms`);
  console.log(`ratio ${(noisy / Math.max(1, quiet)).toFixed(2)} (goal <= 2.00); quiet tenant errors: ${quietErrors} (goal 0)`);
  console.log(
    `app CPU per request (median): served ${median(servedCpu).toFixed(0)} us, refused ${median(refusedCpu).toFixed(0)} us ` +
      `(ratio ${(median(refusedCpu) / Math.max(1, median(servedCpu))).toFixed(2)})`,
  );
}

if (process.argv[2] === '--flood') {
  floodMain(process.argv[3]).catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
} else {
  // The bounds as shipped: the quiet tenant shares the flood's address and its right key must pass regardless.
  // No drain delay, so that the app exits (and writes its BENCH_PROFILE) within the harness's wait.
  finish(withStack({ SHUTDOWN_DELAY_MS: '0' }, run));
}
