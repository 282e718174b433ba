// Does a flood of hostile bodies without credentials cost a quiet tenant anything? The quiet tenant runs a
// steady GET /workflows; in alternate rounds a flood posts the report's body (920 KiB, 110,000 unknown
// properties, no credential) to POST /console/api/session and to a tenant route at the same time.
//   npx tsx bench/hostile-bodies.ts        (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (3), BENCH_SECONDS (5), QUIET_RATE (100 req/s), QUIET_CONNECTIONS (5), FLOOD_CONNECTIONS
// (20 per route), BENCH_SKIP_BUILD=1. Goal (docs/security.md, "Request cost before authentication"): the quiet
// tenant's p99 with the flood at most 2x its p99 alone, and no error for it.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon, { type Result } from 'autocannon';
import { finish, median, ROOT, withStack, type Stack } from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const QUIET_RATE = Number(process.env.QUIET_RATE ?? 100);
const QUIET_CONNECTIONS = Number(process.env.QUIET_CONNECTIONS ?? 5);
const FLOOD_CONNECTIONS = Number(process.env.FLOOD_CONNECTIONS ?? 20);

function hostileBody(): string {
  const parts = ['"operatorKey":"x"'];
  for (let i = 0; i < 110_000; i++) parts.push(`"${i.toString(36)}":0`);
  return `{${parts.join(',')}}`;
}

/** A flood from its own process (a load generator sharing this one's event loop would delay the quiet timings). */
function flood(url: string, bodyFile: string): Promise<{ answered: number; errors: number }> {
  const args = [resolve(ROOT, 'node_modules/autocannon/autocannon.js'), '-j', '-c', String(FLOOD_CONNECTIONS), '-d', String(SECONDS)];
  args.push('-m', 'POST', '-H', 'content-type=application/json', '-i', bodyFile, url);
  return new Promise((done, fail) =>
    execFile(process.execPath, args, { maxBuffer: 1 << 24 }, (err, stdout) => {
      if (err) return fail(err);
      const r = JSON.parse(stdout) as { '2xx': number; non2xx: number; errors: number };
      done({ answered: r['2xx'] + r.non2xx, errors: r.errors });
    }),
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
  const bodyFile = join(mkdtempSync(join(tmpdir(), 'cws-hostile-')), 'body.json');
  const body = hostileBody();
  writeFileSync(bodyFile, body);
  console.log(
    `quiet: GET /workflows at ${QUIET_RATE} req/s over ${QUIET_CONNECTIONS} connections; flood: a ${(body.length / 1024).toFixed(0)} KiB body of 110,000 properties, no credential, over ${FLOOD_CONNECTIONS} connections to each of two routes; ${ROUNDS} rounds x ${SECONDS} s, alternating\n`,
  );
  await quietLoad(quietUrl, quietKey); // warm-up

  const alone: number[] = [];
  const crowded: number[] = [];
  let quietErrors = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const a = await quietLoad(quietUrl, quietKey);
    alone.push(a.latency.p99);
    quietErrors += a.non2xx + a.errors + a.timeouts;
    console.log(
      `round ${round}  quiet alone      p50 ${a.latency.p50} ms  p99 ${a.latency.p99} ms  errors ${a.non2xx + a.errors + a.timeouts}`,
    );
    const floods = Promise.all([
      flood(`${stack.appUrl}/console/api/session`, bodyFile),
      flood(`${stack.appUrl}/v1/tenants/other/connect-sessions`, bodyFile),
    ]);
    const c = await quietLoad(quietUrl, quietKey);
    const [signIn, tenant] = await floods;
    crowded.push(c.latency.p99);
    quietErrors += c.non2xx + c.errors + c.timeouts;
    console.log(
      `round ${round}  quiet with flood p50 ${c.latency.p50} ms  p99 ${c.latency.p99} ms  errors ${c.non2xx + c.errors + c.timeouts}` +
        `   (flood answered: sign-in ${signIn.answered}, tenant route ${tenant.answered})`,
    );
  }
  const quiet = median(alone);
  const noisy = median(crowded);
  console.log(`\nquiet tenant p99 (median of ${ROUNDS} rounds): alone ${quiet} ms, during the flood ${noisy} ms`);
  console.log(`ratio ${(noisy / Math.max(1, quiet)).toFixed(2)} (goal <= 2.00); quiet tenant errors: ${quietErrors} (goal 0)`);
}

// The failed-credential bounds count per client address, and every client here is 127.0.0.1: lifted, so that the
// flood keeps its full cost (checked, 401) rather than the throttle's cheaper 429 (bench/credential-flood.ts).
finish(
  withStack(
    { API_KEY_MAX_FAILURES_PER_CLIENT: '1000000', SIGN_IN_MAX_FAILURES_PER_CLIENT: '100000', SIGN_IN_MAX_FAILURES: '1000000' },
    run,
  ),
);
