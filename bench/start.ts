// Start-up time as a newcomer meets it: from the `npm start` command to /health/ready answering 200, in a
// fresh clone of this checkout (test/support/clone.ts) with nothing configured.
//   cold: the first start of a fresh clone: build (SWC), initdb, migrations included.
//   warm: a later start with nothing changed since the last one (the build is skipped).
// The clone lives in a new directory only its owner may enter (as /root is for root), so as root this
// measures the case where local state and the PostgreSQL binaries go where the postgres user can reach them.
// Beside them, for scale on a shared machine: a bare `node` process started and answering one HTTP request.
// Each start's CPU (user + system, of npm, the service and its PostgreSQL, up to the first 200) is printed too:
// on a loaded machine the wall clock mostly measures the wait for a core, the CPU what a start costs.
//   npx tsx bench/start.ts        Env: COLD_ROUNDS (2), WARM_ROUNDS (5). Not part of `npm test`.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/common/free-port.js';
import { makeClone } from '../test/support/clone.js';
import './harness.js'; // prints the runtime this bench runs on

const COLD_ROUNDS = Number(process.env.COLD_ROUNDS ?? 2);
const WARM_ROUNDS = Number(process.env.WARM_ROUNDS ?? 5);
/** The goals (seconds, `npm start` to ready): a newcomer's first start of a fresh clone, and every start after it. */
const COLD_GOAL = 5;
const WARM_GOAL = 1.5;

interface Started {
  ms: number;
  /** CPU ms of the whole process tree (npm, the service, PostgreSQL, the build), up to the first 200. */
  cpuMs: number;
  output: string;
  stop(): Promise<void>;
}

/** Runs a command in its own process group and measures until `url` answers 200. */
async function timeToReady(command: string[], cwd: string, env: Record<string, string>, url: string): Promise<Started> {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...env })) {
    if (
      v !== undefined &&
      !/^npm_/i.test(k) &&
      !['INIT_CWD', 'DATABASE_URL', 'DATA_DIR', 'VAULT_KEYS', 'OPERATOR_API_KEY', 'LOG_FORMAT'].includes(k)
    )
      childEnv[k] = v;
  }
  const t0 = performance.now();
  const proc = spawn(command[0], command.slice(1), { cwd, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${command.join(' ')} exited before it was ready:\n${output}`);
    try {
      if ((await fetch(url)).status === 200) break;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const ms = performance.now() - t0;
  const cpuMs = treeCpuMs(proc.pid ?? 0);
  return {
    ms,
    cpuMs,
    output,
    async stop() {
      process.kill(-(proc.pid ?? 0), 'SIGINT');
      await exited;
      for (let i = 0; i < 300; i++) {
        try {
          process.kill(-(proc.pid ?? 0), 0);
        } catch {
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/**
 * CPU ms so far of a process and all its descendants, alive or reaped (`/proc/<pid>/stat`: utime, stime, and
 * the cutime, cstime of the children it has waited for; 10 ms ticks). PostgreSQL runs in a process group of its
 * own, so the tree is walked by parenthood, not by group.
 */
function treeCpuMs(pid: number): number {
  let ticks = 0;
  const visit = (p: number) => {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      const children = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      for (const child of children ? children.split(' ') : []) visit(Number(child));
    } catch {
      /* ended meanwhile */
    }
  };
  visit(pid);
  return ticks * 10;
}

async function bareNode(): Promise<number> {
  const port = await freePort();
  const script = `require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1')`;
  const started = await timeToReady([process.execPath, '-e', script], tmpdir(), {}, `http://127.0.0.1:${port}/`);
  await started.stop();
  return started.ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const verdict = (ms: number, goal: number) =>
  `goal <= ${goal} s: ${(ms / 1000 / goal).toFixed(2)}x, ${ms / 1000 <= goal ? 'met' : 'MISSED'}`;

async function main(): Promise<void> {
  const cold: number[] = [];
  const warm: number[] = [];
  const coldCpu: number[] = [];
  const warmCpu: number[] = [];
  const bare: number[] = [];
  for (let round = 0; round < COLD_ROUNDS; round++) {
    const home = mkdtempSync(join(tmpdir(), 'cws-bench-start-'));
    const clone = join(home, 'cws-connect');
    let localData: string | null = null;
    try {
      makeClone(clone);
      const port = await freePort();
      const env = { PORT: String(port), SANDBOX_PORT: String(await freePort()) };
      const url = `http://127.0.0.1:${port}/health/ready`;
      bare.push(await bareNode());
      const first = await timeToReady(['npm', 'start'], clone, env, url);
      localData = /local data:\s+(\S+)/.exec(first.output)?.[1] ?? null;
      await first.stop();
      cold.push(first.ms);
      coldCpu.push(first.cpuMs);
      console.log(`cold start ${round + 1}: ${seconds(first.ms)}, CPU ${seconds(first.cpuMs)}  (local data in ${localData})`);
      if (round > 0) continue;
      for (let i = 0; i < WARM_ROUNDS; i++) {
        bare.push(await bareNode());
        const again = await timeToReady(['npm', 'start'], clone, env, url);
        await again.stop();
        warm.push(again.ms);
        warmCpu.push(again.cpuMs);
        console.log(`warm start ${i + 1}: ${seconds(again.ms)}, CPU ${seconds(again.cpuMs)}`);
      }
    } finally {
      if (localData) rmSync(localData, { recursive: true, force: true });
      rmSync(home, { recursive: true, force: true });
    }
  }
  console.log('');
  console.log(
    `warm start (npm start to /health/ready 200, nothing changed): median ${seconds(median(warm))} of ${warm.length} (${warm.map(seconds).join(', ')})  ${verdict(median(warm), WARM_GOAL)}; CPU median ${seconds(median(warmCpu))}`,
  );
  console.log(
    `cold start (fresh clone: no build output, a fresh DATA_DIR):  median ${seconds(median(cold))} of ${cold.length} (${cold.map(seconds).join(', ')})  ${verdict(median(cold), COLD_GOAL)}; CPU median ${seconds(median(coldCpu))}`,
  );
  console.log(
    `bare node process to its first HTTP answer, same run:            median ${seconds(median(bare))}; warm start = ${(median(warm) / median(bare)).toFixed(1)}x that`,
  );
  console.log(
    `load average at the end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${cpus().length} cores`,
  );
}

await main();
