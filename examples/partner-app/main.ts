/**
 * The demo partner app: `npm run demo` while `npm start` runs, then open the address it prints.
 *   CWS_URL         cws-connect's address (default http://localhost:3000)
 *   OPERATOR_API_KEY the operator key (default: the one `npm start` generated in secrets.json in its local data, the directory its banner names)
 *   PARTNER_APP_PORT this app's port (default 5173)
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { localDataDir } from '../../src/config/local-data.js';
import { startPartnerApp } from './server.js';

function operatorKey(): string {
  if (process.env.OPERATOR_API_KEY) return process.env.OPERATOR_API_KEY;
  const file = join(localDataDir(process.env), 'secrets.json');
  const key = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { operatorApiKey?: string }).operatorApiKey : undefined;
  if (!key) throw new Error(`no operator key: set OPERATOR_API_KEY, or run \`npm start\` once (it keeps one in ${file})`);
  return key;
}

const app = await startPartnerApp({
  serviceUrl: (process.env.CWS_URL ?? 'http://localhost:3000').replace(/\/+$/, ''),
  operatorKey: operatorKey(),
  port: Number(process.env.PARTNER_APP_PORT ?? 5173),
}).catch((e: unknown) => {
  console.error(`the demo partner app could not start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
console.log(`\n  demo partner app on ${app.url}  (tenant "${app.tenantId}")\n  open it in a browser on this machine and click "Connect"\n`);
