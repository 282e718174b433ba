import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import type { AgentSession } from './agent-sessions.repository.js';
import { JsonCallTransport } from './mcp-json-transport.js';

/** The shared server's transport, over a real HTTP server, with its server's part played by `onmessage`. */
describe('JsonCallTransport', () => {
  const transport = new JsonCallTransport();
  const stable = Object.freeze({ tools: [{ name: 'a "quoted" tool', inputSchema: { type: 'object' } }] });
  let server: Server;
  let url: string;

  beforeAll(async () => {
    // Answers each request as the SDK's server would, under the id the transport gave it.
    transport.onmessage = (message) => {
      const request = message as JSONRPCRequest;
      const result = request.method === 'tools/list' ? stable : { echo: request.params?.n ?? null };
      void transport.send({ result, jsonrpc: '2.0', id: request.id });
    };
    server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (text += d));
      req.on('end', () => transport.deliver(JSON.parse(text) as JSONRPCRequest, res, { session: {} as AgentSession, requestId: 'r' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const call = async (body: unknown) => (await fetch(url, { method: 'POST', body: JSON.stringify(body) })).text();

  it.each([[1], ['same'], ['a "quoted" \\ id']])(
    "answers under the caller's id %p, a frozen result as JSON.stringify would",
    async (id) => {
      for (let i = 0; i < 2; i++) {
        const text = await call({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });
        expect(text).toBe(JSON.stringify({ result: stable, jsonrpc: '2.0', id }));
      }
      const other = await call({ jsonrpc: '2.0', id, method: 'tools/call', params: { n: 3 } });
      expect(JSON.parse(other)).toEqual({ result: { echo: 3 }, jsonrpc: '2.0', id });
    },
  );
});
