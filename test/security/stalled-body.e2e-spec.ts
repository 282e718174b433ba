import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from '../support/connect.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newReceiver, openSocket, type Receiver } from './support.js';

/**
 * A body that stops arriving (docs/security.md, "Timeouts"): cut after HTTP_BODY_TIMEOUT_MS (short here; 30 s
 * by default) with a 408 in the contract's shape and the connection closed, on Express's routes, the facade's
 * and the receiver alike, well before the idle timeout (left at its default, 120 s); an upload that keeps
 * coming in is not cut however long it lasts.
 */

const BODY_TIMEOUT_MS = 600;

describe('stalled request bodies', () => {
  let t: TestApp;
  let receiver: Receiver;

  beforeAll(async () => {
    t = await startTestApp({ env: { HTTP_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS), LOG_LEVEL: 'warn' } });
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    receiver = await newReceiver(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  const head = (method: string, path: string, headers: string, length: number) =>
    `${method} ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n${headers}\r\n`;

  it.each([
    ['an operator route (Express)', () => head('PATCH', '/v1/tenants/acme', `authorization: Bearer ${t.operatorKey}\r\n`, 1000)],
    [
      'a streamed facade upload',
      () => head('POST', '/v1/tenants/acme/workflows', `authorization: Bearer ${t.operatorKey}\r\nx-user-id: u-alice\r\n`, 1000),
    ],
    ['the inbound receiver', () => head('POST', receiver.path, `authorization: ${receiver.authorization}\r\n`, 1000)],
    ['the console sign-in (no credential)', () => head('POST', '/console/api/session', '', 1000)],
  ])('%s: a body that stalls after a few bytes is cut with 408 and the connection closed', async (_label, request) => {
    const conn = await openSocket(t);
    conn.socket.write(request() + '{"name":');
    await conn.closed;
    const answer = conn.received();
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"request_timeout"');
    expect(answer.toLowerCase()).toContain('connection: close');
  });

  it('an upload that keeps coming, for many times the body timeout, is not cut', async () => {
    const body = `{"name":"dripped"${' '.repeat(24)}}`;
    const conn = await openSocket(t);
    conn.socket.write(head('PATCH', '/v1/tenants/acme', `authorization: Bearer ${t.operatorKey}\r\n`, Buffer.byteLength(body)));
    // One byte every BODY_TIMEOUT_MS / 4: the whole body takes about ten times the timeout.
    for (const ch of body) {
      if (conn.socket.destroyed) break;
      conn.socket.write(ch);
      await new Promise((r) => setTimeout(r, BODY_TIMEOUT_MS / 4));
    }
    for (let i = 0; i < 100 && !/\r\n\r\n\{/.test(conn.received()); i++) await new Promise((r) => setTimeout(r, 20));
    conn.socket.destroy();
    expect(conn.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect((await t.db.query(`SELECT name FROM tenants WHERE id = 'acme'`)).rows).toEqual([{ name: 'dripped' }]);
  });
});
