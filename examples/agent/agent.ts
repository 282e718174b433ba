import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export interface AgentOptions {
  /** cws-connect's address. */
  serviceUrl: string;
  /** The tenant's key (or the operator key): only the partner's backend holds it, never the agent. */
  key: string;
  tenantId: string;
  /** The partner's id of the user the agent acts for. */
  userId: string;
  log: (line: string) => void;
}

/**
 * A small agent: the partner's backend mints an agent session for one of its users (read tools only), and an MCP
 * client of the official SDK uses it: it lists its tools, reads the user's profile and their workflows. A model would
 * pick the tools; this script calls two. Answers the session id (revoke it with DELETE .../agent-sessions/{id}).
 */
export async function runAgent(o: AgentOptions): Promise<string> {
  // 1. The partner's backend: one session, for one user, with the read tools, for ten minutes.
  const minted = await fetch(`${o.serviceUrl}/v1/tenants/${o.tenantId}/agent-sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ userId: o.userId, tools: ['read'], expiresInSeconds: 600, label: 'example agent' }),
  });
  if (minted.status !== 201) throw new Error(`minting a session answered ${minted.status}: ${await minted.text()}`);
  const session = (await minted.json()) as { id: string; mcpUrl: string; token: string; tools: string[] };
  o.log(`session ${session.id}: ${session.tools.join(', ')}`);

  // 2. The agent: any MCP client, with the session's URL and token, and nothing else.
  const client = new Client({ name: 'cws-connect-example-agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(session.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${session.token}` } } }),
  );
  try {
    const { tools } = await client.listTools();
    for (const tool of tools) o.log(`tool ${tool.name}: ${tool.title ?? tool.description ?? ''}`);
    for (const name of ['facadeMe', 'facadeListWorkflows']) {
      const result = await client.callTool({ name, arguments: {} });
      const text = (result.content as Array<{ type: string; text?: string }>).find((c) => c.type === 'text')?.text ?? '';
      // A tool error says what to do next: here, most often, the link the user opens to connect.
      o.log(`${name}${result.isError ? ' (error)' : ''}: ${text.slice(0, 300)}`);
    }
  } finally {
    await client.close();
  }
  return session.id;
}
