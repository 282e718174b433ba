import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './spawn-app.js';

/** One call that did not answer as expected, for a test's printout. */
export interface FailedCall {
  tenantId: string;
  what: string;
}

/**
 * A steady load over many tenants: `workers` loops of facade reads (`GET /me` as each tenant's user `u-1`, whose
 * access token the router keeps in memory), and one loop renewing the tenants' connections in turn (`POST
 * .../refresh`: it opens the refresh token and seals the new pair with the tenant's data key, and drops the
 * token every instance held, so that the next reads open it again). A call of a tenant still in `live` that does
 * not answer 200 is a failure; a tenant taken out of `live` (deleted) is no longer called.
 */
export class TenantLoad {
  readonly failures: FailedCall[] = [];
  readonly counts = { reads: 0, renewals: 0 };
  /** Answer times (ms) of the calls that did not answer 200, by status. */
  readonly refusals: Array<{ tenantId: string; status: number; code: string; ms: number }> = [];
  /** Answer times (ms) of the calls answered 200. */
  readonly answered: number[] = [];
  readonly live: Set<string>;
  /** Off: the renewal loop waits (a phase that counts what instances hold). */
  renewing = true;
  private running = false;
  private loops: Promise<void>[] = [];
  private renewalInFlight: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly target: () => string,
    private readonly operatorKey: string,
    tenants: string[],
    private readonly connectionOf: (tenantId: string) => string,
    private readonly workers = 6,
    /** Tenants whose refusals are expected (the key store is down): their non-200 answers are recorded, not failed. */
    private readonly expectRefusals: Set<string> = new Set(),
  ) {
    this.live = new Set(tenants);
  }

  start(): void {
    this.running = true;
    this.loops = [...Array.from({ length: this.workers }, (_, w) => this.readLoop(w)), this.renewLoop()];
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Stops renewing and waits for the renewal in flight. */
  async pauseRenewals(): Promise<void> {
    this.renewing = false;
    await this.renewalInFlight;
  }

  get total(): number {
    return this.counts.reads + this.counts.renewals;
  }

  summary(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const f of this.failures) out[f.what.slice(0, 60)] = (out[f.what.slice(0, 60)] ?? 0) + 1;
    return out;
  }

  private async readLoop(worker: number): Promise<void> {
    for (let n = worker; this.running; n += this.workers) {
      const tenants = [...this.live];
      const tenantId = tenants[n % tenants.length];
      await this.call(tenantId, 'GET', `/v1/tenants/${tenantId}/me`, () => this.counts.reads++);
      await sleep(5);
    }
  }

  private async renewLoop(): Promise<void> {
    for (let n = 0; this.running; n++) {
      if (!this.renewing) {
        await sleep(20);
        continue;
      }
      const tenants = [...this.live];
      const tenantId = tenants[n % tenants.length];
      const call = this.call(
        tenantId,
        'POST',
        `/v1/tenants/${tenantId}/connections/${this.connectionOf(tenantId)}/refresh`,
        () => this.counts.renewals++,
      );
      this.renewalInFlight = call;
      await call;
      await sleep(50);
    }
  }

  private async call(tenantId: string, method: string, path: string, ok: () => void): Promise<void> {
    const started = performance.now();
    try {
      const res = await fetch(`${this.target()}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.operatorKey}`, 'x-user-id': 'u-1' },
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      const ms = performance.now() - started;
      if (res.status === 200) {
        this.answered.push(ms);
        return ok();
      }
      if (!this.live.has(tenantId)) return;
      if (this.expectRefusals.has(tenantId)) {
        const code = (/"code":"([a-z_]+)"/.exec(text) ?? [])[1] ?? '';
        this.refusals.push({ tenantId, status: res.status, code, ms });
        return;
      }
      this.failures.push({
        tenantId,
        what: `${method} ${path.split('/').slice(4).join('/')} answered ${res.status} ${text.slice(0, 100)}`,
      });
    } catch (e) {
      if (this.live.has(tenantId)) this.failures.push({ tenantId, what: `${method}: ${(e as Error).message}` });
    }
  }
}

/** The `q` quantile (0..1) of `values`, NaN for none. */
export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** `/metrics` of an instance, as name → value for the gauges without labels. */
export async function gauges(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^(cws_[a-z_]+) ([0-9.e+-]+)$/gm)) out.set(m[1], Number(m[2]));
  return out;
}

export interface CliRun {
  /** Resolves with the exit code (null: killed) and the output. */
  done: Promise<{ code: number | null; out: string; err: string }>;
  kill(signal: NodeJS.Signals): void;
}

/** `src/cli.ts <args>` as one process (node with tsx's loader: a SIGKILL reaches the command itself, not a wrapper). */
export function runCli(args: string[], env: Record<string, string>): CliRun {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'test',
      SANDBOX: 'off',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'cws-keys-cli-')),
      ...env,
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const done = new Promise<{ code: number | null; out: string; err: string }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out, err }));
  });
  return { done, kill: (signal) => child.kill(signal) };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
