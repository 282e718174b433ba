// What bounding V8's heap costs (docs/operations.md, "Memory"): CPU per inbound delivery (the service's process
// and its PostgreSQL backends, from /proc) and resident size after bursts, with each NODE_OPTIONS in turn,
// rounds alternated, against the compiled service on a seeded database (1,000 connections over 10,000 tenants).
//
//   npx tsx bench/heap-bound.ts
//
// Env: BENCH_NODE_OPTIONS (the settings compared, separated by '|'; default
// '|--max-old-space-size=256|--max-old-space-size=256 --max-semi-space-size=16', the first being none),
// BENCH_ROUNDS (3), BENCH_BURSTS (4 bursts of 20,000 deliveries measured, after one unmeasured), DATABASE_URL,
// BENCH_SKIP_BUILD=1. Not part of `npm test`.
import { randomBytes } from 'node:crypto';
import { availableParallelism, cpus, loadavg } from 'node:os';
import autocannon from 'autocannon';
import { buildApp } from '../test/support/spawn-app.js';
import { DELIVERY_BODY, finish, median } from './harness.js';
import { addReceiver, cpuPerOp, rssMiB, scratchDatabase, startBenchApp, startSandbox } from './measure.js';
import { BIG_TENANT, seedAll } from './scale-seed.js';

const SETTINGS = (process.env.BENCH_NODE_OPTIONS ?? '|--max-old-space-size=256|--max-old-space-size=256 --max-semi-space-size=16').split(
  '|',
);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BURSTS = Number(process.env.BENCH_BURSTS ?? 4);
const BURST = 20_000;

async function main(): Promise<void> {
  if (!process.env.BENCH_SKIP_BUILD) buildApp();
  console.log(
    `bench/heap-bound.ts: ${cpus()[0]?.model ?? '?'} x ${availableParallelism()}, node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  const sandbox = await startSandbox();
  const scratch = await scratchDatabase('cws_heap');
  try {
    const vaultKeys = `heap:${randomBytes(32).toString('base64')}`;
    await seedAll(scratch.db, vaultKeys, await sandbox.tokens('alice'), {
      tenants: 10_000,
      connections: 1000,
      events: 1000,
      payload: DELIVERY_BODY,
    });
    const { id, authorization } = await addReceiver(scratch.db, vaultKeys, BIG_TENANT);
    const cpu = new Map<string, number[]>(SETTINGS.map((s) => [s, []]));
    const rss = new Map<string, number[]>(SETTINGS.map((s) => [s, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const setting of SETTINGS) {
        const { app } = await startBenchApp(scratch.url, sandbox, vaultKeys, { NODE_OPTIONS: setting });
        try {
          const burst = () =>
            autocannon({
              url: `${app.url}/inbound/${BIG_TENANT}/${id}`,
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization },
              body: DELIVERY_BODY,
              connections: 20,
              amount: BURST,
              timeout: 60,
            });
          await burst();
          const measured = await cpuPerOp(scratch.db, scratch.name, app.pid, async () => {
            let n = 0;
            for (let b = 0; b < BURSTS; b++) n += (await burst())['2xx'];
            return n;
          });
          cpu.get(setting)!.push(measured.app + measured.db);
          rss.get(setting)!.push(rssMiB(app.pid));
          console.log(
            `  round ${round + 1}, "${setting || 'none'}": ${(measured.app + measured.db).toFixed(0)} µs per delivery, RSS ${rssMiB(app.pid).toFixed(0)} MiB`,
          );
        } finally {
          await app.stop('SIGTERM');
        }
      }
    }
    console.log('\n| NODE_OPTIONS | CPU per delivery (µs), median | by round | RSS after the bursts (MiB) |\n|---|---:|---|---|');
    for (const setting of SETTINGS) {
      const c = cpu.get(setting)!;
      const r = rss.get(setting)!;
      console.log(
        `| ${setting || 'none'} | ${median(c).toFixed(0)} | ${c.map((v) => v.toFixed(0)).join(', ')} | ${Math.min(...r).toFixed(0)}–${Math.max(...r).toFixed(0)} |`,
      );
    }
  } finally {
    await scratch.drop();
    sandbox.proc.kill('SIGTERM');
  }
}

finish(main());
