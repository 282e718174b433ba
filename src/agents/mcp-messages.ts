import type { ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Progress } from './tool-calls.js';

// What the MCP door reads of a JSON-RPC message before the SDK takes it, and the documents it answers itself.

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** An `initialize` request: whether the client declares URL elicitation (SEP-1036: `capabilities.elicitation.url`). */
export function noteOfClient(message: unknown): { urlElicitation: boolean } | null {
  if (!isObject(message) || message.method !== 'initialize' || !isObject(message.params)) return null;
  const capabilities = message.params.capabilities;
  const elicitation = isObject(capabilities) ? capabilities.elicitation : undefined;
  return { urlElicitation: isObject(elicitation) && isObject(elicitation.url) };
}

/** A tool call that asks for progress: answered as a stream of events (the progress, then the result), not as one JSON. */
export function isStreamingCall(message: unknown): boolean {
  if (!isObject(message) || message.method !== 'tools/call' || !isObject(message.params)) return false;
  const meta = message.params._meta;
  return isObject(meta) && (typeof meta.progressToken === 'string' || typeof meta.progressToken === 'number');
}

/** Sends notifications/progress for the request's progress token, or null when it carries none. */
export function progressOf(token: string | number | undefined, send: (notification: ServerNotification) => Promise<void>): Progress | null {
  if (token === undefined) return null;
  return (progress, total, message) =>
    send({ method: 'notifications/progress', params: { progressToken: token, progress, total, message } });
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/**
 * Whether a request's Origin may call the endpoint: none (not a browser), or one on the host of PUBLIC_URL
 * (any loopback name when that is a loopback address). A page elsewhere that rebinds its own name to this
 * host sends its own Origin, and is refused (MCP, Streamable HTTP: "servers MUST validate the Origin").
 */
export function allowedOrigin(origin: string | undefined, publicUrl: string): boolean {
  if (origin === undefined) return true;
  let host: string;
  try {
    host = new URL(origin).hostname.toLowerCase();
  } catch {
    return false;
  }
  const own = new URL(publicUrl).hostname.toLowerCase();
  return host === own || (LOOPBACK.has(own) && LOOPBACK.has(host));
}

/** The protected resource metadata (RFC 9728) of the MCP endpoint. */
export function protectedResource(mcpUrl: string): Json {
  return {
    resource: mcpUrl,
    resource_name: 'cws-connect MCP',
    bearer_methods_supported: ['header'],
    resource_documentation: `${mcpUrl.slice(0, -'/mcp'.length)}/docs`,
  };
}
