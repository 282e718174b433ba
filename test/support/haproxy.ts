import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/common/free-port.js';

/** Debian's HAProxy: the load balancer of the rolling-restart test. */
export const HAPROXY = '/usr/sbin/haproxy';

/**
 * Makes sure Debian's haproxy is installed (as test/support/chromium.ts does for the browser): with apt-get,
 * once per machine, when missing and this is root; otherwise the test stops here, saying how to install it.
 */
export function ensureHaproxy(): void {
  if (existsSync(HAPROXY)) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`the rolling-restart test needs HAProxy at ${HAPROXY}: install it first (sudo apt-get install -y haproxy)`);
  }
  console.log(`\nHAProxy is missing: installing Debian's haproxy package for the rolling-restart test (once per machine)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'haproxy'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  if (!existsSync(HAPROXY)) throw new Error(`apt-get installed haproxy, but ${HAPROXY} is still missing`);
}

export interface Balancer {
  /** Where clients send requests. */
  url: string;
  /** The state HAProxy's health checks give each server (`UP`, `DOWN`, ...), by server port. */
  states(): Promise<Map<number, string>>;
  /** Resolves once HAProxy sends traffic to the server on `port` again. */
  waitUp(port: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * HAProxy in front of the instances on `ports`, as an operator would run it: health checks on /health/ready every
 * 200 ms (out after two failed checks, back after two 200s; a check may take 3 s on a busy machine), keep-alive to clients and servers, and a retry on another
 * server when a connection to one fails.
 */
export async function startHaproxy(ports: number[]): Promise<Balancer> {
  const dir = mkdtempSync(join(tmpdir(), 'cws-haproxy-'));
  const [port, statsPort] = [await freePort(), await freePort()];
  const config = `global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 10s
  timeout check 3s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
  option http-keep-alive
frontend clients
  bind 127.0.0.1:${port}
  default_backend instances
frontend stats
  bind 127.0.0.1:${statsPort}
  stats enable
  stats uri /stats
backend instances
  balance roundrobin
  option httpchk GET /health/ready
  http-check expect status 200
  default-server inter 200ms fastinter 200ms downinter 200ms fall 2 rise 2
${ports.map((p) => `  server i${p} 127.0.0.1:${p} check`).join('\n')}
`;
  const file = join(dir, 'haproxy.cfg');
  writeFileSync(file, config);
  const proc: ChildProcess = spawn(HAPROXY, ['-f', file, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const states = async (): Promise<Map<number, string>> => {
    const csv = await (await fetch(`http://127.0.0.1:${statsPort}/stats;csv`)).text();
    const [header, ...rows] = csv.split('\n').filter(Boolean);
    const cols = header.replace(/^# /, '').split(',');
    const [sv, st] = [cols.indexOf('svname'), cols.indexOf('status')];
    const out = new Map<number, string>();
    for (const row of rows) {
      const cells = row.split(',');
      const m = /^i(\d+)$/.exec(cells[sv]);
      if (m) out.set(Number(m[1]), cells[st]);
    }
    return out;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await states();
      break;
    } catch {
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`haproxy did not start:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url: `http://127.0.0.1:${port}`,
    states,
    async waitUp(serverPort, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs;
      while ((await states()).get(serverPort) !== 'UP') {
        if (Date.now() > until) throw new Error(`HAProxy did not mark 127.0.0.1:${serverPort} UP in time`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async close() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}
