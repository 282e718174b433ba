import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { openSocket, type Conn } from './support.js';

/** Writes `chunk` every `everyMs` until the socket closes. */
function drip(conn: Conn, chunk: string, everyMs: number): void {
  const timer = setInterval(() => {
    if (conn.socket.destroyed || !conn.socket.writable) clearInterval(timer);
    else conn.socket.write(chunk);
  }, everyMs);
  void conn.closed.then(() => clearInterval(timer));
}

/**
 * The server's own timeouts (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_IDLE_TIMEOUT_MS,
 * HTTP_KEEP_ALIVE_TIMEOUT_MS), set short here: slow or stalled senders are cut off, a steady one is not.
 */
describe('server timeouts', () => {
  let t: TestApp;
  const auth = (t: TestApp) => `authorization: Bearer ${t.operatorKey}\r\nx-user-id: u-alice\r\n`;

  beforeAll(async () => {
    t = await startTestApp({
      env: {
        HTTP_HEADERS_TIMEOUT_MS: '500',
        // Far above the steady upload's 1.4 s below, so that a loaded machine's late timers never reach it.
        HTTP_REQUEST_TIMEOUT_MS: '8000',
        HTTP_IDLE_TIMEOUT_MS: '800',
        HTTP_KEEP_ALIVE_TIMEOUT_MS: '300',
        UPSTREAM_TIMEOUT_MS: '500',
      },
    });
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const slowSenders: Array<[string, (c: Conn) => void, RegExp | null]> = [
    // Slowloris: a header line now and then, never the blank line that ends them.
    [
      'slow headers (operator route)',
      (c) => (c.socket.write('GET /v1/tenants HTTP/1.1\r\nhost: x\r\n'), drip(c, 'x-a: b\r\n', 100)),
      /^HTTP\/1\.1 408 /,
    ],
    [
      'slow headers (facade route)',
      (c) => (c.socket.write(`GET /v1/tenants/acme/workflows HTTP/1.1\r\nhost: x\r\n${auth(t)}`), drip(c, 'x-a: b\r\n', 100)),
      /^HTTP\/1\.1 408 /,
    ],
    ['a request target byte by byte', (c) => (c.socket.write('GET /v1/tenants/acme/wor'), drip(c, 'k', 100)), /^HTTP\/1\.1 408 /],
    ['headers begun, then silence', (c) => c.socket.write('GET /v1/tenants HTTP/1.1\r\nhost: x\r\n'), /^HTTP\/1\.1 408 /],
    ['a connection that never sends', () => undefined, null],
    // A body that stalls: no traffic either way for HTTP_IDLE_TIMEOUT_MS.
    [
      'a stalled upload',
      (c) =>
        c.socket.write(
          `POST /v1/tenants/acme/workflows HTTP/1.1\r\nhost: x\r\n${auth(t)}content-type: application/json\r\ncontent-length: 100000\r\n\r\n{"name":`,
        ),
      null,
    ],
    // A body that drips, never idle: the whole request must still arrive within HTTP_REQUEST_TIMEOUT_MS.
    [
      'a dripping upload',
      (c) => (
        c.socket.write(
          `POST /v1/tenants/acme/proxy/workflows HTTP/1.1\r\nhost: x\r\n${auth(t)}content-type: application/json\r\ncontent-length: 100000\r\n\r\n`,
        ),
        drip(c, ' ', 200)
      ),
      null,
    ],
  ];

  it.each(slowSenders)('closes %s', async (_name, behave, answer) => {
    const conns = await Promise.all(Array.from({ length: 5 }, () => openSocket(t)));
    for (const c of conns) behave(c);
    await Promise.all(conns.map((c) => c.closed));
    for (const c of conns) {
      if (answer) {
        expect(c.received()).toMatch(answer);
        expect(c.received()).toContain('"code":"request_timeout"');
      }
    }
  });

  it('closes twenty slowloris connections while serving others', async () => {
    const conns = await Promise.all(Array.from({ length: 20 }, () => openSocket(t)));
    for (const c of conns) {
      c.socket.write('GET /v1/tenants HTTP/1.1\r\nhost: x\r\n');
      drip(c, 'x-a: b\r\n', 100);
    }
    const served = await t.request('GET', '/v1/tenants/acme/workflows', { headers: { 'x-user-id': 'u-alice' } });
    expect(served.status).toBe(200);
    await Promise.all(conns.map((c) => c.closed));
  });

  it('closes an idle keep-alive connection after its last answer', async () => {
    const c = await openSocket(t);
    c.socket.write('GET /health/live HTTP/1.1\r\nhost: x\r\n\r\n');
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('lets a steady upload through that lasts longer than the header and idle timeouts', async () => {
    const { hostname, port } = new URL(t.url);
    const pad = 'a'.repeat(16 * 1024);
    const parts = ['{"name":"steady","approvers":["bob"],"attributes":{"note":"', ...Array.from({ length: 12 }, () => pad), '"}}'];
    const body = parts.join('');
    let sentAll = false;
    const answer = await new Promise<{ status: number; upstream: string | undefined; afterLastByte: boolean }>((resolve, reject) => {
      const req = httpRequest(
        {
          hostname,
          port,
          path: '/v1/tenants/acme/workflows',
          method: 'POST',
          agent: false,
          headers: {
            authorization: `Bearer ${t.operatorKey}`,
            'x-user-id': 'u-alice',
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
          },
        },
        (res) => {
          const afterLastByte = sentAll;
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, upstream: res.headers['x-upstream-status'] as string | undefined, afterLastByte }),
          );
        },
      );
      req.on('error', reject);
      let next = 0;
      // One part every 100 ms: 1.4 s in all, longer than the header and idle timeouts, never idle for long (a
      // timer of this process may fire hundreds of ms late on a loaded machine: the idle timeout is 8 parts).
      const timer = setInterval(() => {
        req.write(parts[next++]);
        if (next === parts.length) {
          clearInterval(timer);
          sentAll = true;
          req.end();
        }
      }, 100);
    });
    // The upstream read the whole body and answered it: the server did not cut the upload off.
    expect(answer).toEqual({ status: 201, upstream: '201', afterLastByte: true });
  });
});
