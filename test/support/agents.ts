import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { Clock } from '../../src/common/clock.js';
import type { TestApp } from './test-app.js';

export interface MintedSession {
  id: string;
  mcpUrl: string;
  token: string;
  expiresAt: string;
  userId: string;
  tools: string[];
}

/** Mints an agent session through the API (the operator key unless `key` is given); throws unless 201. */
export async function mintSession(t: TestApp, tenantId: string, body: Record<string, unknown>, key?: string): Promise<MintedSession> {
  const res = await t.request<MintedSession>('POST', `/v1/tenants/${tenantId}/agent-sessions`, { body, ...(key ? { key } : {}) });
  if (res.status !== 201) throw new Error(`agent session answered ${res.status}: ${res.text}`);
  return res.body;
}

/** An MCP client of the official SDK, connected to `url` with the session token. */
export async function mcpClient(url: string, token: string, capabilities: ClientCapabilities = {}): Promise<Client> {
  const client = new Client({ name: 'cws-connect-test-agent', version: '1.0.0' }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

/** The text of a tool result's first content block. */
export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.find((c) => c.type === 'text')?.text ?? '';
}

/** A raw JSON-RPC POST to /mcp (no SDK): to see the HTTP status and headers. */
export async function rawMcp(url: string, token: string | null, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

export const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** Real time moved by `offsetMs`: what the service takes for now. */
export class ShiftedClock extends Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}
