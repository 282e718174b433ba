import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StalledBodies } from './stalled-body.js';

/** Resolves once `condition` holds, checked every 5 ms. */
function until(condition: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const poll = () => (condition() ? resolve() : setTimeout(poll, 5));
    poll();
  });
}

/** A request leaves the watch when its answer closes, not at the next tick (a minute away here). */
describe('StalledBodies', () => {
  const stalled = new StalledBodies(240_000);
  let server: Server;
  let url: string;
  const seen: number[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      stalled.watch(req, res);
      seen.push(stalled.size);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    stalled.stop();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = (body: string) =>
    new Promise<string>((resolve, reject) => {
      const req = request(`${url}/`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end(body);
    });

  it('forgets each answered request at once', async () => {
    for (let i = 0; i < 20; i++) expect(await post(`{"n":${i}}`)).toBe('ok');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(20);
    expect(Math.max(...seen)).toBe(1);
    expect(stalled.size).toBe(0);
  });

  it('keeps watching a request whose body has not all arrived', async () => {
    const req = request(`${url}/`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '100' } });
    req.on('error', () => undefined);
    req.write('{"partial":');
    await until(() => stalled.size === 1);
    expect(stalled.size).toBe(1);
    req.destroy();
    await until(() => stalled.size === 0);
    expect(stalled.size).toBe(0);
  });
});

/** A refusal answered before its body arrived: the body is still watched, and cut when it stalls. */
describe('StalledBodies after an early answer', () => {
  const stalled = new StalledBodies(200);
  let server: Server;
  let port: number;

  beforeAll(async () => {
    server = createServer((req, res) => {
      stalled.watch(req, res);
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"code":"unauthorized"}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    stalled.stop();
    await new Promise((resolve) => server.close(resolve));
  });

  it('keeps watching the unfinished body past the answer and closes the connection once it stalls', async () => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write('POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"a":');
    await until(() => answer.includes('unauthorized'));
    expect(answer.startsWith('HTTP/1.1 401')).toBe(true);
    expect(stalled.size).toBe(1);
    await closed;
    expect(stalled.size).toBe(0);
  });
});
