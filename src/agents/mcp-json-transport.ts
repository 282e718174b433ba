import type { ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, JSONRPCRequest, RequestId } from '@modelcontextprotocol/sdk/types.js';

interface Waiting {
  /** The id the caller sent: the server sees this transport's own, so that callers' ids never meet. */
  id: RequestId;
  res: ServerResponse;
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

  /** Hands one plain call, with its caller's `auth` (the handlers' `extra.authInfo`), to the server; its answer goes to `res`. */
  deliver(message: JSONRPCRequest, res: ServerResponse, auth: AuthInfo): void {
    this.next = this.next >= 2 ** 31 ? 1 : this.next + 1;
    const id = this.next;
    this.waiting.set(id, { id: message.id, res });
    res.once('close', () => {
      // A caller who leaves before its answer cancels its call, as the protocol's own cancellation does: the
      // server aborts the handler's signal (a tool call stops) and sends nothing for it.
      if (!res.writableFinished && this.waiting.delete(id))
        this.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'The caller left.' } });
    });
    this.onmessage?.({ ...message, id }, { authInfo: auth });
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
