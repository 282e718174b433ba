import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** How many ports below the system's ephemeral range are candidates. */
const SPAN = 12_000;
const TRIES = 32;

/**
 * A TCP port free on 127.0.0.1 at the time of asking, picked at random below the system's ephemeral range.
 *
 * A port the kernel hands out for `listen(0)` comes from the ephemeral range, the same range every outgoing
 * connection on the machine takes its local port from: between this answer and the caller's own listen, a
 * PostgreSQL client or an HTTP request may take it (EADDRINUSE). Below that range only listeners compete. Falls back to
 * the kernel's choice where the range leaves no room below it.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  const from = Math.max(1024, low - SPAN);
  if (low - from >= 1000)
    for (let i = 0; i < TRIES; i++) {
      const port = randomInt(from, low);
      if (await bindable(port)) return port;
    }
  return listenAny();
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 && low < 65536 ? low : 32768;
  } catch {
    return 32768; // not Linux: the IANA dynamic range starts at 49152, Linux's default at 32768; either is above
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function listenAny(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
