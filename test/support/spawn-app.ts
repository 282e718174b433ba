import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/common/free-port.js';

/**
 * Tests that need the service as a real separate process (several instances on one database, SIGKILL,
 * resident memory) run the compiled app: `node dist/src/main.js`. tsx cannot run it: esbuild does not
 * emit decorator metadata, which NestJS's injection needs. The global setup compiles once per run, with
 * the same build as `npm start` (SWC, skipped when nothing changed).
 */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const MAIN_JS = resolve(ROOT, 'dist/src/main.js');

export function buildApp(): void {
  const built = spawnSync(process.execPath, [resolve(ROOT, 'tools/build.mjs')], { cwd: ROOT, encoding: 'utf8' });
  if (built.status !== 0 || !existsSync(MAIN_JS)) throw new Error(`the build failed:\n${built.stderr}`);
}

export interface SpawnedApp {
  url: string;
  port: number;
  proc: ChildProcess;
  pid: number;
  /** stdout and stderr, as written. */
  output: string[];
  /** Sends a signal and waits for the process to exit; resolves with its exit code (null when killed). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface SpawnOptions {
  readyTimeoutMs?: number;
  port?: number;
  /**
   * Run this command (e.g. `npm start`) instead of `node dist/src/main.js`, in a process group of its own:
   * stop() then signals the group, as Ctrl-C in a terminal does.
   */
  command?: string[];
  /** Where to run it (default: this checkout). */
  cwd?: string;
}

/** Starts `node dist/src/main.js` with the given environment and waits until /health/ready answers 200. */
export async function spawnApp(env: Record<string, string | undefined>, options: SpawnOptions = {}): Promise<SpawnedApp> {
  const port = options.port ?? Number(env.PORT ?? 0);
  const actualPort = port || (await freePort());
  const childEnv: Record<string, string> = {};
  // No drain delay unless a test asks for one: there is no load balancer to wait for (drain.e2e-spec.ts).
  for (const [k, v] of Object.entries({ ...process.env, LOG_LEVEL: 'warn', SHUTDOWN_DELAY_MS: '0', ...env, PORT: String(actualPort) }))
    if (v !== undefined) childEnv[k] = v;
  const group = options.command !== undefined;
  // An `npm start` of its own, not one that inherits this test run's npm settings.
  if (group) for (const k of Object.keys(childEnv)) if (/^npm_/i.test(k) || k === 'INIT_CWD') delete childEnv[k];
  const [file, ...args] = options.command ?? [process.execPath, MAIN_JS];
  const proc = spawn(file, args, { cwd: options.cwd ?? ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: group });
  const output: string[] = [];
  proc.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  proc.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${actualPort}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`the app exited before it was ready:\n${output.join('')}`);
    try {
      const res = await fetch(`${url}/health/ready`);
      if (res.status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      if (group && proc.pid) process.kill(-proc.pid, 'SIGKILL');
      else proc.kill('SIGKILL');
      throw new Error(`the app was not ready in time:\n${output.join('')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    port: actualPort,
    proc,
    pid: proc.pid ?? 0,
    output,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) {
        if (group && proc.pid) process.kill(-proc.pid, signal);
        else proc.kill(signal);
      }
      const code = await exited;
      // npm exits as soon as its child has; wait for the rest of the group too (there should be none).
      if (group && proc.pid) await groupGone(proc.pid);
      return code;
    },
  };
}

async function groupGone(pgid: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`process group ${pgid} still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the process has written something matching `pattern` (e.g. its start-up banner). */
export async function waitForOutput(app: SpawnedApp, pattern: RegExp, timeoutMs = 5000): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(app.output.join(''));
    if (match) return match;
    if (Date.now() > deadline) throw new Error(`no output matching ${pattern} in time:\n${app.output.join('')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
