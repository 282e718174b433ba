import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { JSONRPCMessage, JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { JsonCallTransport } from './mcp-json-transport.js';

/** The shared server's transport, over a real HTTP server, with its server's part played by `onmessage`. */
describe('JsonCallTransport', () => {
  const transport = new JsonCallTransport();
  const stable = Object.freeze({ tools: [{ name: 'a "quoted" tool', inputSchema: { type: 'object' } }] });
  /** The notifications the server was handed (a caller's leaving). */
  const notifications: JSONRPCMessage[] = [];
  let arrived: (request: JSONRPCRequest) => void = () => undefined;
  let notified: () => void = () => undefined;
  let server: Server;
  let url: string;

  beforeAll(async () => {
    // Answers each request as the SDK's server would, under the id the transport gave it; a `wait` call is left unanswered.
    transport.onmessage = (message, extra) => {
      if (!('id' in message)) {
        notifications.push(message);
        notified();
        return;
      }
      const request = message as JSONRPCRequest;
      if (request.method === 'wait') return arrived(request);
      const result = request.method === 'tools/list' ? stable : { echo: request.params?.n ?? null, client: extra?.authInfo?.clientId };
      void transport.send({ result, jsonrpc: '2.0', id: request.id });
    };
    server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (text += d));
      req.on('end', () =>
        transport.deliver(JSON.parse(text) as JSONRPCRequest, res, { token: 't', clientId: String(req.headers['x-client']), scopes: [] }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const call = async (body: unknown, client = 'c1') =>
    (await fetch(url, { method: 'POST', headers: { 'x-client': client }, body: JSON.stringify(body) })).text();

  it.each([[1], ['same'], ['a "quoted" \\ id']])(
    "answers under the caller's id %p, a frozen result as JSON.stringify would",
    async (id) => {
      for (let i = 0; i < 2; i++) {
        const text = await call({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });
        expect(text).toBe(JSON.stringify({ result: stable, jsonrpc: '2.0', id }));
      }
      const other = await call({ jsonrpc: '2.0', id, method: 'tools/call', params: { n: 3 } });
      expect(JSON.parse(other)).toEqual({ result: { echo: 3, client: 'c1' }, jsonrpc: '2.0', id });
    },
  );

  it("hands each call its caller's auth, with the call", async () => {
    const [a, b] = await Promise.all([
      call({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { n: 1 } }, 'alice'),
      call({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { n: 2 } }, 'bob'),
    ]);
    expect(JSON.parse(a)).toMatchObject({ result: { echo: 1, client: 'alice' }, id: 1 });
    expect(JSON.parse(b)).toMatchObject({ result: { echo: 2, client: 'bob' }, id: 1 });
  });

  it('cancels the call of a caller who leaves before its answer, under the id the server knows it by', async () => {
    const waiting = new Promise<JSONRPCRequest>((resolve) => (arrived = resolve));
    const cancelled = new Promise<void>((resolve) => (notified = resolve));
    const leaving = request(url, { method: 'POST', headers: { 'x-client': 'c1' } });
    leaving.on('error', () => undefined);
    leaving.end(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'wait', params: {} }));
    const { id } = await waiting;
    leaving.destroy();
    await cancelled;
    // One notification only: the calls answered before cancelled nothing.
    expect(notifications).toEqual([
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'The caller left.' } },
    ]);
    // Its late answer goes nowhere; the next call is answered as usual.
    await transport.send({ result: {}, jsonrpc: '2.0', id });
    expect(JSON.parse(await call({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { n: 8 } }))).toMatchObject({ id: 8 });
  });
});
