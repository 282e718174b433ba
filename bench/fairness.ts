// Does a noisy tenant cost a quiet one anything? The quiet tenant runs a steady GET /workflows; in alternate
// rounds the noisy tenant holds N stalled uploads and floods GET /workflows at the same time.
//   npx tsx bench/fairness.ts        (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (3), BENCH_SECONDS (5), QUIET_RATE (100 req/s), QUIET_CONNECTIONS (5), STALLED (270),
// FLOOD_CONNECTIONS (50; 0: no flood), BENCH_SKIP_BUILD=1, BENCH_VERBOSE=1. The app runs with its default limits
// unless FACADE_TENANT_MAX_IN_FLIGHT / FACADE_TENANT_MAX_UPLOADS are set here (the app inherits the environment).
// Goal: the quiet tenant's p99 with the neighbour at most 2x its p99 alone, and no error for it.
import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import autocannon, { type Result } from 'autocannon';
import { finish, median, ROOT, withStack, type Stack } from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const QUIET_RATE = Number(process.env.QUIET_RATE ?? 100);
const QUIET_CONNECTIONS = Number(process.env.QUIET_CONNECTIONS ?? 5);
const STALLED = Number(process.env.STALLED ?? 270);
const FLOOD_CONNECTIONS = Number(process.env.FLOOD_CONNECTIONS ?? 50);

interface Stalled {
  sockets: Socket[];
  /** How many were answered 429 too_many_requests (the rest hold their upload open). */
  refused: () => number;
}

/** N uploads that send their headers and a few bytes of a 1 MiB body, then nothing. */
async function stallUploads(appUrl: string, key: string, n: number): Promise<Stalled> {
  const { hostname, port } = new URL(appUrl);
  const answers: string[] = [];
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect(Number(port), hostname, () => {
            socket.write(
              `POST /v1/tenants/noisy/workflows HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${key}\r\nx-user-id: u-alice\r\ncontent-type: application/json\r\ncontent-length: 1048576\r\n\r\n{"name":"`,
            );
            resolve(socket);
          });
          socket.once('data', (d: Buffer) => answers.push(d.toString('latin1', 0, 12)));
          socket.on('error', () => undefined);
        }),
    ),
  );
  const refused = () => answers.filter((a) => a === 'HTTP/1.1 429').length;
  // Holding: every upload is either refused or open and quiet (the burst of opening them is not measured).
  for (let settled = 0, last = -1; settled < 5;) {
    await new Promise((r) => setTimeout(r, 100));
    settled = answers.length === last ? settled + 1 : 0;
    last = answers.length;
  }
  return { sockets, refused };
}

/** The flood, from its own process: a load generator sharing this one's event loop would delay the quiet tenant's timings. */
function flood(url: string, key: string): Promise<{ '2xx': number; non2xx: number }> {
  if (FLOOD_CONNECTIONS === 0) return Promise.resolve({ '2xx': 0, non2xx: 0 });
  const args = [resolve(ROOT, 'node_modules/autocannon/autocannon.js'), '-j', '-c', String(FLOOD_CONNECTIONS), '-d', String(SECONDS)];
  args.push('-H', `authorization=Bearer ${key}`, '-H', 'x-user-id=u-alice', url);
  return new Promise((done, fail) =>
    execFile(process.execPath, args, { maxBuffer: 1 << 24 }, (err, stdout) => {
      if (err) return fail(err);
      const r = JSON.parse(stdout) as { '2xx': number; non2xx: number };
      done({ '2xx': r['2xx'], non2xx: r.non2xx });
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
  const noisyKey = await stack.tenant('noisy');
  const quietUrl = `${stack.appUrl}/v1/tenants/quiet/workflows`;
  const noisyUrl = `${stack.appUrl}/v1/tenants/noisy/workflows`;
  console.log(
    `quiet: GET /workflows at ${QUIET_RATE} req/s over ${QUIET_CONNECTIONS} connections; noisy: ${STALLED} stalled uploads + a flood over ${FLOOD_CONNECTIONS} connections; ${ROUNDS} rounds x ${SECONDS} s, alternating\n`,
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
      `round ${round}  quiet alone          ${a.requests.average.toFixed(0).padStart(5)} req/s  p50 ${a.latency.p50} ms  p99 ${a.latency.p99} ms  errors ${a.non2xx + a.errors + a.timeouts}`,
    );

    const stalled = await stallUploads(stack.appUrl, noisyKey, STALLED);
    const flooding = flood(noisyUrl, noisyKey);
    const c = await quietLoad(quietUrl, quietKey);
    const f = await flooding;
    crowded.push(c.latency.p99);
    quietErrors += c.non2xx + c.errors + c.timeouts;
    console.log(
      `round ${round}  quiet with neighbour ${c.requests.average.toFixed(0).padStart(5)} req/s  p50 ${c.latency.p50} ms  p99 ${c.latency.p99} ms  errors ${c.non2xx + c.errors + c.timeouts}` +
        `   (noisy: ${STALLED - stalled.refused()} uploads held, ${stalled.refused()} refused 429; flood ${f['2xx']} served, ${f.non2xx} refused)`,
    );
    for (const s of stalled.sockets) s.destroy();
    await new Promise((r) => setTimeout(r, 500));
  }
  const quiet = median(alone);
  const noisy = median(crowded);
  console.log(`\nquiet tenant p99 (median of ${ROUNDS} rounds): alone ${quiet} ms, with the noisy neighbour ${noisy} ms`);
  console.log(`ratio ${(noisy / Math.max(1, quiet)).toFixed(2)} (goal <= 2.00); quiet tenant errors: ${quietErrors} (goal 0)`);
}

finish(withStack({}, run));
