import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connectViaHttp, newTenant } from './support/connect.js';
import { mintSession } from './support/agents.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The server scenarios of the official conformance suite that cannot apply to this endpoint, and why
 * (docs/agents.md, "Conformance", lists the same): each asks for a fixture of the suite's own test server, a tool,
 * resource or prompt of a fixed name, or a feature a stateless endpoint of generated tools does not offer.
 */
export const NOT_APPLICABLE: Record<string, string> = {
  'completion-complete': 'no prompts or resource templates, so no completion capability',
  'tools-call-image': 'calls the fixture tool test_image_content',
  'tools-call-audio': 'calls the fixture tool test_audio_content',
  'tools-call-embedded-resource': 'calls the fixture tool test_embedded_resource',
  'tools-call-mixed-content': 'calls the fixture tool test_multiple_content_types',
  'tools-call-with-logging': 'calls the fixture tool test_tool_with_logging',
  'tools-call-with-progress':
    'calls the fixture tool test_tool_with_progress (launchWorkflowAndWait sends progress: test/agents.e2e-spec.ts)',
  'tools-call-sampling': 'calls the fixture tool test_sampling; the endpoint never asks the client to sample',
  'tools-call-elicitation': 'calls the fixture tool test_elicitation; form elicitation needs a server-side session',
  'elicitation-sep1034-defaults': 'calls the fixture tool test_elicitation_sep1034_defaults',
  'elicitation-sep1330-enums': 'calls the fixture tool test_elicitation_sep1330_enums',
  'resources-list': 'no resources: the endpoint offers tools only',
  'resources-read-text': 'no resources: reads the fixture test://static-text',
  'resources-read-binary': 'no resources: reads the fixture test://static-binary',
  'resources-templates-read': 'no resource templates',
  'resources-subscribe': 'no resources to subscribe to',
  'resources-unsubscribe': 'no resources to subscribe to',
  'prompts-list': 'no prompts: the endpoint offers tools only',
  'prompts-get-simple': 'no prompts: gets the fixture test_simple_prompt',
  'prompts-get-with-args': 'no prompts: gets the fixture test_prompt_with_arguments',
  'prompts-get-embedded-resource': 'no prompts: gets the fixture test_prompt_with_embedded_resource',
  'prompts-get-with-image': 'no prompts: gets the fixture test_prompt_with_image',
};

/**
 * The scenarios that apply and pass. tools-call-simple-text and tools-call-error ask for fixture tools too; they pass
 * because the endpoint's answer to an unknown tool (a tool result with isError and a text) is what they check.
 */
const PASSING = [
  'dns-rebinding-protection',
  'logging-set-level',
  'ping',
  'server-initialize',
  'tools-call-error',
  'tools-call-simple-text',
  'tools-list',
];

/** A test-only stand-in for an MCP client's configured header: the suite's client sends no Authorization of its own. */
function withAuthorization(target: string, token: string): Promise<Server> {
  const { hostname, port } = new URL(target);
  const server = createServer((req, res) => {
    const { host: _host, ...headers } = req.headers;
    const upstream = request(
      { hostname, port, path: req.url, method: req.method, headers: { ...headers, authorization: `Bearer ${token}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function runSuite(url: string): Promise<{ code: number | null; output: string }> {
  const cli = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/dist/index.js');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, 'server', '--url', url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('the MCP endpoint passes the official conformance suite (@modelcontextprotocol/conformance, server mode)', () => {
  let t: TestApp;
  let wrapper: Server;

  beforeAll(async () => {
    t = await startTestApp();
    await newTenant(t, 'acme');
    await connectViaHttp(t, 'acme', { userId: 'u-alice', as: 'alice' });
    const session = await mintSession(t, 'acme', { userId: 'u-alice', tools: ['read', 'write', 'admin'] });
    wrapper = await withAuthorization(session.mcpUrl, session.token);
  });
  afterAll(async () => {
    await new Promise((r) => wrapper?.close(r));
    await t?.close();
  });

  it('passes every scenario that applies; the others are exactly the ones listed with their reason', async () => {
    const { port } = wrapper.address() as AddressInfo;
    const { output } = await runSuite(`http://localhost:${port}/mcp`);
    const summary = [...output.matchAll(/^([✓✗]) ([\w-]+): (\d+) passed, (\d+) failed$/gm)].map((m) => ({
      scenario: m[2],
      passed: Number(m[3]),
      failed: Number(m[4]),
    }));
    expect(summary.length).toBeGreaterThan(20);
    const failing = summary.filter((s) => s.failed > 0).map((s) => s.scenario);
    const passing = summary.filter((s) => s.failed === 0 && s.passed > 0).map((s) => s.scenario);
    if (failing.sort().join() !== Object.keys(NOT_APPLICABLE).sort().join()) console.log(output.slice(-20_000));
    expect(failing.sort()).toEqual(Object.keys(NOT_APPLICABLE).sort());
    expect(passing.sort()).toEqual(PASSING);
    // Informational checks only (JSON answers to concurrent requests: streams are optional), and no failure.
    expect(summary.find((s) => s.scenario === 'server-sse-multiple-streams')).toMatchObject({ failed: 0 });
  });
});
