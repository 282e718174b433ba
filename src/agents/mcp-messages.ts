import { isJSONRPCRequest, SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';

// What the MCP door reads of a request before the SDK takes it, and the documents it answers itself.

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
  if (!isObject(message)) return false;
  const method = message.method;
  return typeof method === 'string' && PLAIN_METHODS.has(method) && !isStreamingCall(message) && isJSONRPCRequest(message);
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
