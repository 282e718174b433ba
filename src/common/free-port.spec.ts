import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort } from './free-port.js';

const listen = (port: number) =>
  new Promise<() => Promise<void>>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(() => new Promise<void>((r) => srv.close(() => r()))));
  });

describe('freePort', () => {
  it('answers a port below the ephemeral range that the caller can then listen on', async () => {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const port = await freePort();
    expect(port).toBeGreaterThanOrEqual(1024);
    expect(port).toBeLessThan(low);
    const close = await listen(port);
    await close();
  });

  it('never answers a port something listens on', async () => {
    const taken = new Map<number, () => Promise<void>>();
    try {
      for (let i = 0; i < 20; i++) {
        const port = await freePort();
        expect(taken.has(port)).toBe(false);
        taken.set(port, await listen(port));
      }
    } finally {
      await Promise.all([...taken.values()].map((close) => close()));
    }
  });
});
