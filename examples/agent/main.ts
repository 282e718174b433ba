/**
 * The example agent: `npm run agent` while `npm start` runs (and, for a connected user, after `npm run demo`'s Connect).
 *   CWS_URL           cws-connect's address (default http://localhost:3000)
 *   OPERATOR_API_KEY  the operator key (default: the one `npm start` generated in secrets.json in its local data)
 *   AGENT_TENANT      the tenant (default demo-partner, the demo partner app's)
 *   AGENT_USER        the partner's user id (default demo-user, the demo's)
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { localDataDir } from '../../src/config/local-data.js';
import { runAgent } from './agent.js';

function operatorKey(): string {
  if (process.env.OPERATOR_API_KEY) return process.env.OPERATOR_API_KEY;
  const file = join(localDataDir(process.env), 'secrets.json');
  const key = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { operatorApiKey?: string }).operatorApiKey : undefined;
  if (!key) throw new Error(`no operator key: set OPERATOR_API_KEY, or run \`npm start\` once (it keeps one in ${file})`);
  return key;
}

await runAgent({
  serviceUrl: (process.env.CWS_URL ?? 'http://localhost:3000').replace(/\/+$/, ''),
  key: operatorKey(),
  tenantId: process.env.AGENT_TENANT ?? 'demo-partner',
  userId: process.env.AGENT_USER ?? 'demo-user',
  log: (line) => console.log(line),
}).catch((e: unknown) => {
  console.error(`the example agent failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
