import { describe, expect, it } from '@jest/globals';
import { allowedOrigin, isPlainCall, isStreamingCall, noteOfClient, protectedResource } from './mcp-messages.js';

describe('what the MCP door reads of a message', () => {
  it('lets a request without Origin, or from the host of PUBLIC_URL, through; refuses another host', () => {
    expect(allowedOrigin(undefined, 'https://connect.example.com')).toBe(true);
    expect(allowedOrigin('https://connect.example.com', 'https://connect.example.com')).toBe(true);
    expect(allowedOrigin('https://evil.example.com', 'https://connect.example.com')).toBe(false);
    expect(allowedOrigin('http://evil.example.com', 'http://127.0.0.1:3000')).toBe(false);
    expect(allowedOrigin('http://localhost:5173', 'http://127.0.0.1:3000')).toBe(true);
    expect(allowedOrigin('null', 'http://127.0.0.1:3000')).toBe(false);
  });

  it('notes whether an initializing client declares URL elicitation', () => {
    const init = (capabilities: unknown) => ({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities } });
    expect(noteOfClient(init({ elicitation: { url: {} } }))).toEqual({ urlElicitation: true });
    expect(noteOfClient(init({ elicitation: {} }))).toEqual({ urlElicitation: false });
    expect(noteOfClient(init(undefined))).toEqual({ urlElicitation: false });
    expect(noteOfClient({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBeNull();
    expect(noteOfClient([init({})])).toBeNull();
  });

  it('streams only a tool call that asks for progress', () => {
    const call = (meta?: unknown) => ({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'x', ...(meta ? { _meta: meta } : {}) },
    });
    expect(isStreamingCall(call({ progressToken: 'p1' }))).toBe(true);
    expect(isStreamingCall(call({ progressToken: 3 }))).toBe(true);
    expect(isStreamingCall(call())).toBe(false);
    expect(isStreamingCall({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { progressToken: 1 } } })).toBe(false);
  });

  it('takes on the shared server only one request of a plain method with the headers the SDK transport requires', () => {
    const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json; charset=utf-8' };
    const rpc = (method: string, params: unknown = {}) => ({ jsonrpc: '2.0', id: 1, method, params });
    for (const method of ['ping', 'tools/list', 'tools/call']) expect(isPlainCall(headers, rpc(method))).toBe(true);
    expect(isPlainCall({ ...headers, 'mcp-protocol-version': '2025-11-25' }, rpc('ping'))).toBe(true);
    expect(isPlainCall(headers, rpc('initialize'))).toBe(false);
    expect(isPlainCall(headers, rpc('tools/call', { name: 'x', _meta: { progressToken: 1 } }))).toBe(false);
    expect(isPlainCall(headers, [rpc('ping')])).toBe(false);
    expect(isPlainCall(headers, { jsonrpc: '2.0', method: 'ping' })).toBe(false);
    expect(isPlainCall({ ...headers, accept: 'application/json' }, rpc('ping'))).toBe(false);
    expect(isPlainCall({ ...headers, 'content-type': 'text/plain' }, rpc('ping'))).toBe(false);
    expect(isPlainCall({ ...headers, 'mcp-protocol-version': '1999-01-01' }, rpc('ping'))).toBe(false);
  });

  it('names the resource in its metadata (RFC 9728)', () => {
    expect(protectedResource('https://connect.example.com/mcp')).toMatchObject({
      resource: 'https://connect.example.com/mcp',
      bearer_methods_supported: ['header'],
      resource_documentation: 'https://connect.example.com/docs',
    });
  });
});
