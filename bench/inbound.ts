// Inbound deliveries accepted per second (authenticated, committed, acknowledged) and their CPU, against two
// bare node:http endpoints, same load generator, alternating rounds in the same run:
// - the floor (issue 24): it appends each body to PostgreSQL with the service's group commit (CommitBatcher,
//   one group in flight, at most 250 a group), one prepared INSERT per group, synchronous_commit as the service
//   uses it (on), and answers 200 after the COMMIT. No auth, no parse, one table with its key and nothing else;
// - a bare endpoint that answers 200 and stores nothing (the network and HTTP part alone).
// The CPU per delivery of the app and of the floor counts the process and its own PostgreSQL backends.
//   npx tsx bench/inbound.ts          (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (5), BENCH_SECONDS (5), BENCH_CONNECTIONS (50), BENCH_LOG_LEVEL (info), BENCH_SKIP_BUILD=1,
// BENCH_PROFILE=<dir> (a CPU profile of the app), BENCH_NODE_ARGS (node flags of the app, e.g. --perf-basic-prof), BENCH_VERBOSE=1 (children's stderr).
// The bare endpoint and the app each run in their own process (the bare one is this file, `bare` as argument),
// so that the CPU time per request of each is its own. Not part of `npm test`.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { availableParallelism } from 'node:os';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { CommitBatcher, statementRefused } from '../src/common/commit-batcher.js';
import { freePort } from '../src/common/free-port.js';
import { parseVaultKeys } from '../src/config/app-config.js';
import { TokenVault } from '../src/vault/token-vault.service.js';
import {
  cpuBoundRate,
  cpuMs,
  databaseCpu,
  databaseCpuSince,
  DELIVERY_BODY,
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
const BODY = DELIVERY_BODY;

/** Goal of issue 24: the app's CPU per delivery (process + database backends) over the floor's. */
const FLOOR_GOAL = 1.5;
const FLOOR_TABLE = `CREATE TABLE IF NOT EXISTS inbound_floor (id uuid PRIMARY KEY, received_at timestamptz NOT NULL DEFAULT now(), body jsonb NOT NULL)`;

/**
 * The floor: reads the body, appends it to PostgreSQL with the service's group commit, answers 200 with its id
 * once committed. The payloads go as one JSON array, as the service sends them (no array-literal escaping).
 */
function floor(port: number, databaseUrl: string): void {
  const pool = new pg.Pool({ connectionString: databaseUrl, application_name: 'inbound-floor', max: 4 });
  const inserts = new CommitBatcher<{ id: string; body: string }>(
    async (items) => {
      await pool.query({
        name: 'floor_append',
        text: `INSERT INTO inbound_floor (id, body)
               SELECT v.id, p.body FROM unnest($1::uuid[]) WITH ORDINALITY AS v(id, ord)
                 JOIN jsonb_array_elements($2::jsonb) WITH ORDINALITY AS p(body, ord) ON p.ord = v.ord`,
        values: [items.map((i) => i.id), `[${items.map((i) => i.body).join(',')}]`],
      });
      return new Set(items.map((i) => i.id));
    },
    250,
    statementRefused,
    1,
  );
  createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(200).end(); // the readiness probe
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = randomUUID();
      inserts.save({ id, body: Buffer.concat(chunks).toString('utf8') }).then(
        () => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"id":"${id}"}`),
        () => res.writeHead(500).end(),
      );
    });
  }).listen(port, '127.0.0.1');
}

/** Reads the body, answers 200 with an id, stores nothing. */
function bare(port: number): void {
  createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"id":"${randomUUID()}"}`));
  }).listen(port, '127.0.0.1');
}

interface Row {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
  /** CPU time of the serving process per acknowledged request. */
  cpuUs: number;
  /** CPU time of the app's PostgreSQL backends per acknowledged request (the app only). */
  dbUs: number;
  /** CPU time of this process (autocannon, the load generator) per acknowledged request. */
  loadUs: number;
}

async function run(stack: Stack, vaultKeys: string): Promise<void> {
  const { appUrl, appProc, databaseUrl, operatorKey } = stack;
  const created = await fetch(`${appUrl}/v1/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operatorKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id: 'bench', name: 'Bench', environment: 'sandbox', allowedReturnUrls: ['https://partner.example/'] }),
  });
  // A tenant without eventsTargetUrl: the events are stored as `no_target`, so outbound delivery does not
  // compete for the database during the measurement (ingest only, as the bare endpoint does).
  await json(created);
  const receiverId = randomUUID();
  const authorization = `Bearer ${randomBytes(32).toString('base64url')}`;
  const sealed = await new TokenVault({ vaultKeys: parseVaultKeys(vaultKeys) }).seal(authorization, {
    table: 'webhook_receivers',
    id: receiverId,
    column: 'secret_enc',
    tenantId: 'bench',
  });
  const database = new URL(databaseUrl).pathname.slice(1);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await db.query(`INSERT INTO webhook_receivers (id, tenant_id, auth_method, secret_enc) VALUES ($1, 'bench', 'bearer', $2)`, [
      receiverId,
      sealed,
    ]);

    const barePort = await freePort();
    const bareProc = start('bare', ['--import', 'tsx', 'bench/inbound.ts', 'bare', String(barePort)], {});
    await ready(`http://127.0.0.1:${barePort}/`);
    await db.query(FLOOR_TABLE);
    const floorPort = await freePort();
    const floorProc = start('floor', ['--import', 'tsx', 'bench/inbound.ts', 'floor', String(floorPort), databaseUrl], {});
    await ready(`http://127.0.0.1:${floorPort}/`);
    const headers = { 'content-type': 'application/json', authorization };
    const modes = [
      { mode: 'bare endpoint', url: `http://127.0.0.1:${barePort}/inbound`, pid: bareProc.pid, backends: null },
      { mode: 'floor', url: `http://127.0.0.1:${floorPort}/inbound`, pid: floorProc.pid, backends: 'inbound-floor' },
      { mode: 'cws-connect', url: `${appUrl}/inbound/bench/${receiverId}`, pid: appProc.pid, backends: 'cws-connect%' },
    ];
    for (const m of modes.slice(1)) {
      const check = await fetch(m.url, { method: 'POST', headers, body: BODY }).catch(() => null);
      if (check?.status !== 200) throw new Error(`${m.mode} answered ${check?.status}: ${await check?.text()}`);
    }
    console.log(
      `autocannon, ${CONNECTIONS} connections, ${BODY.length}-byte JSON body, ${ROUNDS} rounds x ${SECONDS} s per endpoint, alternating\n`,
    );

    for (const m of modes) await autocannon({ url: m.url, method: 'POST', headers, body: BODY, connections: CONNECTIONS, duration: 2 }); // warm-up
    const storedBefore = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events`)).rows[0].n;
    const floorBefore = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM inbound_floor`)).rows[0].n;
    let floorAcknowledged = 0;
    let acknowledged = 0;
    let commits = 0;
    const results = new Map<string, Row[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      for (const m of modes) {
        const cpuBefore = cpuMs(m.pid);
        const loadBefore = process.cpuUsage();
        const app = m.mode === 'cws-connect';
        const dbBefore = m.backends ? await databaseCpu(db, database, m.backends) : null;
        const commitsBefore = app ? await transactions(databaseUrl) : 0;
        const r: Result = await autocannon({
          url: m.url,
          method: 'POST',
          headers,
          body: BODY,
          connections: CONNECTIONS,
          duration: SECONDS,
        });
        const ok = Math.max(1, r['2xx']);
        const cpuUs = ((cpuMs(m.pid) - cpuBefore) * 1000) / ok;
        const load = process.cpuUsage(loadBefore);
        const loadUs = (load.user + load.system) / ok;
        const dbUs = dbBefore && m.backends ? (databaseCpuSince(dbBefore, await databaseCpu(db, database, m.backends)) * 1000) / ok : 0;
        if (m.mode === 'floor') floorAcknowledged += r['2xx'];
        if (app) {
          acknowledged += r['2xx'];
          commits += (await transactions(databaseUrl)) - commitsBefore - 1;
        }
        const row: Row = {
          rps: r['2xx'] / SECONDS,
          p50: r.latency.p50,
          p99: r.latency.p99,
          failed: r.non2xx + r.errors + r.timeouts,
          cpuUs,
          dbUs,
          loadUs,
        };
        console.log(
          `round ${round}  ${m.mode.padEnd(14)} ${row.rps.toFixed(0).padStart(7)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  CPU ${cpuUs.toFixed(0)} µs/req` +
            (m.backends ? `  database backends ${dbUs.toFixed(0)} µs/req` : '') +
            (row.failed ? `  (${row.failed} failed)` : ''),
        );
        results.set(m.mode, [...(results.get(m.mode) ?? []), row]);
      }
    }
    const stored = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events`)).rows[0].n - storedBefore;
    const floorStored = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM inbound_floor`)).rows[0].n - floorBefore;
    if (floorStored < floorAcknowledged) throw new Error(`the floor lost acknowledged bodies: ${floorStored} of ${floorAcknowledged}`);

    const bareRows = results.get('bare endpoint') ?? [];
    const floorRows = results.get('floor') ?? [];
    const appRows = results.get('cws-connect') ?? [];
    console.log(
      '\n| endpoint (median of rounds) | req/s | p50 ms | p99 ms | serving process CPU µs/req | database backends CPU µs/req | failed |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const [mode, rows] of [
      ['bare endpoint, stores nothing', bareRows],
      ['floor: bare endpoint, group-committed INSERT before the 200', floorRows],
      ['cws-connect /inbound, committed before the 200', appRows],
    ] as const) {
      const dbUs = rows === bareRows ? '–' : median(rows.map((r) => r.dbUs)).toFixed(0);
      console.log(
        `| ${mode} | ${median(rows.map((r) => r.rps)).toFixed(0)} | ${median(rows.map((r) => r.p50))} | ${median(rows.map((r) => r.p99))} | ${median(rows.map((r) => r.cpuUs)).toFixed(0)} | ${dbUs} | ${rows.reduce((n, r) => n + r.failed, 0)} |`,
      );
    }
    // Per round: cws-connect's round against the bare endpoint's just before it (the machine's load moves between rounds).
    const ratios = appRows.map((a, i) => a.rps / bareRows[i].rps);
    const appCpu = median(appRows.map((r) => r.cpuUs));
    const bareCpu = median(bareRows.map((r) => r.cpuUs));
    console.log(
      `\nevents stored during the rounds: ${stored}, deliveries acknowledged: ${acknowledged}${stored < acknowledged ? '  (LOST ACKNOWLEDGED DELIVERIES)' : ''}`,
    );
    console.log(
      `database transactions committed during the cws-connect rounds: ${commits} (${(acknowledged / Math.max(1, commits)).toFixed(1)} deliveries per commit, background work included)`,
    );
    console.log(`per round, cws-connect / bare req/s: ${ratios.map((r) => r.toFixed(2)).join(' ')}`);
    console.log(
      `CPU µs per request (median): cws-connect ${appCpu.toFixed(0)}, bare endpoint ${bareCpu.toFixed(0)} (ratio ${(appCpu / bareCpu).toFixed(2)})`,
    );
    const dbCpu = median(appRows.map((r) => r.dbUs));
    console.log(
      `CPU µs per delivery (median): cws-connect ${appCpu.toFixed(0)} + its database backends ${dbCpu.toFixed(0)} = ${(appCpu + dbCpu).toFixed(0)}, bare endpoint ${bareCpu.toFixed(0)}`,
    );
    // What the machine allows the app's path at best, with the CPU each process spent per delivery: the load
    // generator, the app and its database backends on the same cores (the bare endpoint's rate is as measured).
    const loadCpu = median(appRows.map((r) => r.loadUs));
    const ceiling = cpuBoundRate({ 'load generator': loadCpu, 'cws-connect': appCpu, 'database backends': dbCpu }, [
      'load generator',
      'cws-connect',
    ]);
    const bareRate = median(bareRows.map((r) => r.rps));
    const appRate = median(appRows.map((r) => r.rps));
    console.log(
      `CPU-bound ceiling of cws-connect's path: ${ceiling.toFixed(0)} deliveries/s (load generator ${loadCpu.toFixed(0)} + app ${appCpu.toFixed(0)} + database backends ${dbCpu.toFixed(0)} µs per delivery on ${availableParallelism()} cores), ` +
        `${(ceiling / bareRate).toFixed(3)} of the bare endpoint's median; measured ${appRate.toFixed(0)}/s, ${((100 * appRate) / ceiling).toFixed(0)} % of that ceiling`,
    );
    console.log(`cws-connect / bare throughput: ${median(ratios).toFixed(3)} (median of ${ROUNDS} rounds)`);
    // The floor's goal: per round, the app's CPU per delivery (process + backends) over the floor's just before it.
    const floorRatios = appRows.map((a, i) => (a.cpuUs + a.dbUs) / (floorRows[i].cpuUs + floorRows[i].dbUs));
    const floorRatio = median(floorRatios);
    const floorCpu = median(floorRows.map((r) => r.cpuUs));
    const floorDb = median(floorRows.map((r) => r.dbUs));
    console.log(`per round, cws-connect / floor CPU per delivery: ${floorRatios.map((r) => r.toFixed(2)).join(' ')}`);
    console.log(
      `RESULT inbound floor: CPU per delivery ${(appCpu + dbCpu).toFixed(0)} µs (app ${appCpu.toFixed(0)} + database ${dbCpu.toFixed(0)}) vs floor ${(floorCpu + floorDb).toFixed(0)} µs ` +
        `(process ${floorCpu.toFixed(0)} + database ${floorDb.toFixed(0)}): ratio ${floorRatio.toFixed(2)} (goal <= ${FLOOR_GOAL}: ${floorRatio <= FLOOR_GOAL ? 'met' : 'MISSED'})`,
    );
    if (floorRatio > FLOOR_GOAL)
      console.log(
        process.env.BENCH_PROFILE
          ? "held by: the profile of the app (its heaviest self-time items, printed after the run); the database's share is the backends' figure above"
          : 'held by: run again with BENCH_PROFILE=<dir> to print the profile items that hold it (docs/benchmarks.md names them for the last recorded run)',
      );
    inboundCpuUs = appCpu;
    if (stored < acknowledged) throw new Error('acknowledged deliveries are missing from the events table');
  } finally {
    await db.end();
  }
}

/** The app's CPU per delivery in the last run, for the profile's µs per item. */
let inboundCpuUs = 0;

if (process.argv[2] === 'bare') {
  bare(Number(process.argv[3]));
} else if (process.argv[2] === 'floor') {
  floor(Number(process.argv[3]), process.argv[4]);
} else {
  const vaultKeys = `bench:${randomBytes(32).toString('base64')}`;
  let appExited: Promise<unknown> = Promise.resolve();
  finish(
    withStack({ VAULT_KEYS: vaultKeys }, (stack) => {
      appExited = new Promise((resolve) => stack.appProc.once('exit', resolve));
      return run(stack, vaultKeys);
    }).then(async () => {
      const dir = process.env.BENCH_PROFILE;
      if (!dir) return;
      await Promise.race([appExited, new Promise((r) => setTimeout(r, 15_000))]);
      console.log(`\nheaviest self-time items of the app's profile (${dir}), share of its samples and µs of a delivery:`);
      for (const line of profileTop(dir, inboundCpuUs)) console.log(`  ${line}`);
    }),
  );
}
