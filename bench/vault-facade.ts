// A warm facade call's CPU with tenant keys against the same call with the VAULT_KEYS ring (0.2.0's format), in one run.
//   npx tsx bench/vault-facade.ts     (DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/postgres)
// Env: BENCH_ROUNDS (9), BENCH_SECONDS (4), BENCH_CONNECTIONS (20), BENCH_SKIP_BUILD=1, BENCH_CALLGRIND=<dir> (instructions
// per request of the app under valgrind's callgrind instead of the rounds; BENCH_REQUESTS, BENCH_WARMUP, BENCH_PASSES).
// One app (compiled) on one scratch database, two tenants with alice connected to each: `keys`, whose tokens are sealed
// with its data key (this release's format), and `ring`, connected while a `vault:reencrypt --to-ring` hold kept the
// instance sealing with the ring, as 0.2.0 seals. Rounds of GET /v1/tenants/{id}/workflows alternate between them
// (autocannon); each round's CPU is the app's process plus its PostgreSQL backends, per request; the figure is the
// ratio of the two medians, keys / ring (the per-round ratios are printed: the machine's load moves them). A warm
// call opens nothing (its token is in the router's cache), so the two should cost the same. Goal (issue 44): <= 1.02.
// Not part of `npm test`.
import autocannon from 'autocannon';
import pg from 'pg';
import { ENVELOPE_CAPABILITY } from '../src/vault/vault-instances.service.js';
import {
  CALLGRIND_DIR,
  callgrindInstructions,
  cpuMs,
  databaseCpu,
  databaseCpuSince,
  finish,
  median,
  withStack,
  type Stack,
} from './harness.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const GOAL = 1.02;
/** The vault_instances row of `vault:reencrypt --to-ring` (src/cli/vault-reencrypt.command.ts, RING_HOLD). */
const RING_HOLD = 'hold:ring-format';

async function run(stack: Stack): Promise<void> {
  const db = new pg.Client({ connectionString: stack.databaseUrl });
  db.on('error', () => undefined); // the scratch database is dropped under it at the end
  await db.connect();
  const database = new URL(stack.databaseUrl).pathname.slice(1);
  const keysKey = await stack.tenant('keys');
  // From the instance's next heartbeat (VAULT_HEARTBEAT_MS) it seals with the ring, as while a rollback is prepared.
  // The hold holds the ring's key ids, not the envelope format's capability (ENVELOPE_CAPABILITY): no instance seals in it.
  const kids = (await db.query<{ key_ids: string[] }>(`SELECT key_ids FROM vault_instances LIMIT 1`)).rows[0].key_ids.filter(
    (k) => k !== ENVELOPE_CAPABILITY,
  );
  await db.query(`INSERT INTO vault_instances (instance_id, key_ids, last_seen) VALUES ($1, $2::text[], 'infinity')`, [RING_HOLD, kids]);
  await new Promise((r) => setTimeout(r, 3500));
  const ringKey = await stack.tenant('ring');
  const formats = (
    await db.query<{ tenant_id: string; format: string }>(
      `SELECT tenant_id, split_part(access_token_enc, '.', 1) AS format FROM connections ORDER BY tenant_id`,
    )
  ).rows;
  if (
    JSON.stringify(formats) !==
    JSON.stringify([
      { tenant_id: 'keys', format: 'v2' },
      { tenant_id: 'ring', format: 'v1' },
    ])
  )
    throw new Error(`the tokens are not sealed as the bench needs: ${JSON.stringify(formats)}`);
  const modes = [
    { mode: 'ring (0.2.0)', tenant: 'ring', key: ringKey },
    { mode: 'tenant keys', tenant: 'keys', key: keysKey },
  ].map((m) => ({
    ...m,
    url: `${stack.appUrl}/v1/tenants/${m.tenant}/workflows`,
    headers: { authorization: `Bearer ${m.key}`, 'x-user-id': 'u-alice', accept: 'application/json' },
  }));
  for (const m of modes) {
    const res = await fetch(m.url, { headers: m.headers });
    if (res.status !== 200) throw new Error(`${m.mode}: the facade answered ${res.status}: ${await res.text()}`);
    if (CALLGRIND_DIR === null) await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: 2 }); // warm-up
  }
  if (CALLGRIND_DIR !== null) return countInstructions(modes, stack.appProc.pid ?? 0);
  console.log(`${CONNECTIONS} connections, ${ROUNDS} rounds x ${SECONDS} s per tenant, alternating (the first one alternates too)\n`);
  const perRequest: Record<string, number[]> = { ring: [], keys: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const m of round % 2 ? modes : [...modes].reverse()) {
      const dbBefore = await databaseCpu(db, database, 'cws-connect%');
      const cpuBefore = cpuMs(stack.appProc.pid);
      const r = await autocannon({ url: m.url, headers: m.headers, connections: CONNECTIONS, duration: SECONDS });
      const requests = Math.max(1, r.requests.total);
      const appUs = ((cpuMs(stack.appProc.pid) - cpuBefore) * 1000) / requests;
      const dbUs = (databaseCpuSince(dbBefore, await databaseCpu(db, database, 'cws-connect%')) * 1000) / requests;
      const failed = r.non2xx + r.errors + r.timeouts;
      if (failed > 0) throw new Error(`${m.mode}: ${failed} calls failed in round ${round}`);
      perRequest[m.tenant].push(appUs + dbUs);
      console.log(
        `round ${round}  ${m.mode.padEnd(13)} ${r.requests.average.toFixed(0).padStart(6)} req/s  app ${appUs.toFixed(0)} µs/req + database ${dbUs.toFixed(1)}`,
      );
    }
  }
  await db.end();
  const ratios = perRequest.keys.map((k, i) => k / perRequest.ring[i]);
  const ratio = median(perRequest.keys) / median(perRequest.ring);
  console.log(`\nper round, tenant keys / ring CPU: ${ratios.map((r) => r.toFixed(3)).join(' ')} (median ${median(ratios).toFixed(3)})`);
  console.log(
    `CPU µs per warm facade call (app + database, median): tenant keys ${median(perRequest.keys).toFixed(0)}, ring ${median(perRequest.ring).toFixed(0)}`,
  );
  console.log(
    `RESULT warm facade call with tenant keys: ${ratio.toFixed(3)}x the ring's (goal <= ${GOAL}: ${ratio <= GOAL ? 'met' : 'MISSED'})`,
  );
}

/**
 * BENCH_CALLGRIND=<dir>: the app runs under valgrind's callgrind, and the figure is its instructions per request for
 * each tenant (BENCH_REQUESTS, 3000, after a warm-up), over BENCH_PASSES (5) passes: a count the machine's load does not move.
 */
async function countInstructions(modes: Array<{ mode: string; url: string; headers: Record<string, string> }>, pid: number): Promise<void> {
  const requests = Number(process.env.BENCH_REQUESTS ?? 3000);
  const counts: number[] = [];
  // Passes in turn, the order reversed each time: the first still carries the JIT's work on the path both share, and
  // garbage collection lands in one pass or another; the figure compares each tenant's median over the later passes.
  const passes = Number(process.env.BENCH_PASSES ?? 5);
  const order = Array.from({ length: passes }, (_, i) => (i % 2 ? [...modes].reverse() : modes)).flat();
  const byMode = new Map<string, number[]>();
  for (const [i, m] of order.entries()) {
    const send = async (amount: number) => {
      const r = await autocannon({ url: m.url, headers: m.headers, connections: 10, amount, timeout: 60 });
      if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${m.mode}: ${r.non2xx + r.errors + r.timeouts} failed calls`);
    };
    counts.push(await callgrindInstructions(pid, requests, send));
    if (i >= modes.length) byMode.set(m.mode, [...(byMode.get(m.mode) ?? []), counts.at(-1) ?? 0]);
    console.log(
      `${m.mode.padEnd(13)} ${Math.round(counts.at(-1) ?? 0).toLocaleString('en')} instructions per request (${requests} requests)`,
    );
  }
  const [ring, keys] = modes.map((m) => median(byMode.get(m.mode) ?? []));
  const ratio = keys / ring;
  console.log(
    `median of passes 2-${passes}: ring ${Math.round(ring).toLocaleString('en')}, tenant keys ${Math.round(keys).toLocaleString('en')}`,
  );
  console.log(
    `RESULT warm facade call with tenant keys: ${ratio.toFixed(3)}x the ring's instructions (goal <= ${GOAL}: ${ratio <= GOAL ? 'met' : 'MISSED'})`,
  );
}

finish(withStack({ VAULT_HEARTBEAT_MS: '1000', LOG_LEVEL: 'warn' }, run));
