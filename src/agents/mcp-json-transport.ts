import type { ServerResponse } from 'node:http';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  isJSONRPCRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentSession } from './agent-sessions.repository.js';
import { isStreamingCall } from './mcp-messages.js';

/** What a tool handler needs of the HTTP request it answers. */
export interface CallContext {
  session: AgentSession;
  requestId: string;
  /** Aborted when the caller leaves before its answer; absent, the server's own for the request (closed with it). */
  signal?: AbortSignal;
}

/** The methods the one shared server answers: a single request each, whose answer is one JSON body. */
const PLAIN_METHODS = new Set(['tools/call', 'tools/list', 'ping']);
const SUPPORTED_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);

/**
 * Whether a POST is a plain call the shared server may take: one JSON-RPC request of tools/call (without a progress
 * token), tools/list or ping, with the headers the SDK's Streamable HTTP transport requires of it (it accepts both
 * JSON and event streams, its body is JSON, its protocol version header, when sent, is one the SDK speaks).
 * Anything else (initialize, notifications, batches, streams, a header or message the transport would refuse) goes
 * to the SDK's own transport, which answers it, errors included, exactly as the protocol says.
 */
export function isPlainCall(
  headers: { accept?: string; 'content-type'?: string; 'mcp-protocol-version'?: string | string[] },
  message: unknown,
): message is JSONRPCRequest {
  const accept = headers.accept;
  if (accept === undefined || !accept.includes('application/json') || !accept.includes('text/event-stream')) return false;
  const type = headers['content-type'];
  if (type === undefined || type.split(';')[0].trim().toLowerCase() !== 'application/json') return false;
  const version = headers['mcp-protocol-version'];
  if (version !== undefined && (typeof version !== 'string' || !SUPPORTED_VERSIONS.has(version))) return false;
  if (message === null || typeof message !== 'object' || Array.isArray(message)) return false;
  const method = (message as { method?: unknown }).method;
  return typeof method === 'string' && PLAIN_METHODS.has(method) && !isStreamingCall(message) && isJSONRPCRequest(message);
}

interface Waiting {
  /** The id the caller sent: the server sees this transport's own, so that callers' ids never meet. */
  id: RequestId;
  res: ServerResponse;
  context: CallContext;
}

/**
 * The transport of the instance's one shared MCP server (the SDK's Server, connected once): each plain call is
 * handed to it under an id of this transport's (callers all count from 1), and its answer is written back to that
 * call's HTTP response as one JSON body under the caller's id. Building a server and a Streamable HTTP transport
 * per request (the SDK's stateless pattern) cost more CPU than the facade call a tool makes (bench/agents.ts).
 */
export class JsonCallTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private next = 0;
  private readonly waiting = new Map<number, Waiting>();

  /** The JSON of results that never change (frozen: a grant's tools/list), written once each. */
  private readonly frozen = new WeakMap<object, string>();

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.waiting.clear();
    this.onclose?.();
  }

  /** The context of a call the server is answering (its handler's `extra.requestId`). */
  contextOf(id: RequestId): CallContext | undefined {
    return typeof id === 'number' ? this.waiting.get(id)?.context : undefined;
  }

  /** Hands one plain call to the server; its answer goes to `res`. */
  deliver(message: JSONRPCRequest, res: ServerResponse, context: CallContext): void {
    this.next = this.next >= 2 ** 31 ? 1 : this.next + 1;
    const id = this.next;
    this.waiting.set(id, { id: message.id, res, context });
    this.onmessage?.({ ...message, id });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // A JSON answer carries only the response: notifications and requests to the client have no place on it
    // (calls that want progress are streamed by the SDK's transport).
    if (!('id' in message) || 'method' in message || typeof message.id !== 'number') return;
    const waiting = this.waiting.get(message.id);
    if (waiting === undefined) return;
    this.waiting.delete(message.id);
    const { res } = waiting;
    if (res.destroyed || res.writableEnded) return;
    const result = 'result' in message ? message.result : undefined;
    const body =
      result !== undefined && Object.isFrozen(result)
        ? `{"result":${this.jsonOf(result)},"jsonrpc":"2.0","id":${JSON.stringify(waiting.id)}}`
        : JSON.stringify({ ...message, id: waiting.id });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  private jsonOf(result: object): string {
    let json = this.frozen.get(result);
    if (json === undefined) {
      json = JSON.stringify(result);
      this.frozen.set(result, json);
    }
    return json;
  }
}
