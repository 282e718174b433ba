/**
 * The partner projects the packing test installs the packed packages into, as a stranger writes them: each
 * imports the packages by name, from its own node_modules, and nothing of this repository.
 */

const nodeTypes = { types: ['node'], strict: true, skipLibCheck: true, target: 'ES2022', lib: ['ES2022'] };

/**
 * The same steps for the ESM and the CommonJS program: `session` creates a connect session for the page;
 * `check <connectionId>` reads the connection and verifies the delivery in EVENT_FILE (and a forged copy).
 * Each prints one JSON line.
 */
const steps = (verified: string) => `
const client = new CwsConnectClient({ baseUrl: env('CWS_URL'), apiKey: env('CWS_KEY'), tenantId: env('CWS_TENANT') });
const [step, connectionId] = process.argv.slice(2);
if (step === 'session') {
  const session = await client.createConnectSession({ kind: 'user', userId: env('CWS_USER'), returnUrl: env('RETURN_URL') });
  console.log(JSON.stringify({ connectUrl: session.connectUrl }));
} else if (step === 'check') {
  const connection = await client.getConnection(connectionId);
  const delivery = JSON.parse(readFileSync(env('EVENT_FILE'), 'utf8'));
  const event = ${verified};
  let forged = 'accepted';
  try {
    verifyEvent(delivery.headers, delivery.raw.replace(connectionId, '00000000-0000-4000-8000-000000000000'), env('CWS_EVENTS_SECRET'));
  } catch (e) {
    forged = e instanceof EventVerificationError ? e.name : String(e);
  }
  console.log(JSON.stringify({ connection, event, forged }));
}`;

export const projectFiles: Record<string, string> = {
  // ESM, TypeScript, moduleResolution node16: compiled with tsc and run.
  'node16/tsconfig.json': JSON.stringify({
    compilerOptions: { ...nodeTypes, module: 'node16', moduleResolution: 'node16', rootDir: '.', outDir: 'out' },
    include: ['main.ts'],
  }),
  'node16/main.ts': `import { readFileSync } from 'node:fs';
import { CwsConnectClient, EventVerificationError, verifyEvent, type Connection, type VerifiedEvent } from '@cws-connect/node-client';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(name + ' is not set');
  return value;
}

/** Never called: the types must refuse a session without its kind, and type a connection's kind. */
export async function typesAreStrict(client: CwsConnectClient): Promise<'user' | 'admin'> {
  // @ts-expect-error kind is required
  await client.createConnectSession({ userId: 'u', returnUrl: 'https://partner.example/' });
  const connection: Connection = await client.getConnection('c');
  return connection.kind;
}
${steps(`verifyEvent(delivery.headers, delivery.raw, env('CWS_EVENTS_SECRET')) satisfies VerifiedEvent`)}
`,

  // CommonJS: require(), type-checked as JavaScript (checkJs) under node16 resolution, run as it is.
  'cjs/package.json': JSON.stringify({ type: 'commonjs' }),
  'cjs/tsconfig.json': JSON.stringify({
    compilerOptions: { ...nodeTypes, module: 'node16', moduleResolution: 'node16', allowJs: true, checkJs: true, noEmit: true },
    include: ['main.js'],
  }),
  'cjs/main.js': `// @ts-check
const { readFileSync } = require('node:fs');
const { CwsConnectClient, EventVerificationError, verifyEvent } = require('@cws-connect/node-client');
const { CwsConnectError, resultFromUrl } = require('@cws-connect/connect-browser');

/** @param {string} name */
function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(name + ' is not set');
  return value;
}

/** Never called: the types must refuse a session without its kind. @param {InstanceType<typeof CwsConnectClient>} client */
async function typesAreStrict(client) {
  // @ts-expect-error kind is required
  await client.createConnectSession({ userId: 'u', returnUrl: 'https://partner.example/' });
}
module.exports = { typesAreStrict };

async function main() {${steps(`verifyEvent(delivery.headers, delivery.raw, env('CWS_EVENTS_SECRET'))`)}
  if (step === 'returned') {
    // The browser module's reading of a returnUrl, required (a partner's CommonJS tests do this).
    const outcome = resultFromUrl(env('RETURN_URL') + '?status=error&error=access_denied');
    console.log(JSON.stringify(outcome instanceof CwsConnectError ? { name: outcome.name, code: outcome.code } : outcome));
  }
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
`,

  // A partner's page (bundled by Vite) and server code, TypeScript with moduleResolution bundler.
  'bundler/tsconfig.json': JSON.stringify({
    compilerOptions: {
      ...nodeTypes,
      lib: ['ES2022', 'DOM'],
      module: 'preserve',
      moduleResolution: 'bundler',
      noEmit: true,
    },
    include: ['main.ts', 'server.ts'],
  }),
  'bundler/index.html': `<!doctype html>
<html lang="en">
  <head><meta charset="utf-8" /><title>Partner</title></head>
  <body>
    <button id="connect" disabled>Connect</button>
    <pre id="result"></pre>
    <script type="module" src="./main.ts"></script>
  </body>
</html>
`,
  'bundler/main.ts': `import { CwsConnectError, open, type Connected } from '@cws-connect/connect-browser';

const button = document.querySelector<HTMLButtonElement>('#connect')!;
const result = document.querySelector<HTMLPreElement>('#result')!;
const connectUrl = new URL(location.href).searchParams.get('connectUrl') ?? '';
button.addEventListener('click', () => {
  open(connectUrl).then(
    (connected: Connected) => (result.textContent = JSON.stringify(connected)),
    (e: unknown) => (result.textContent = JSON.stringify({ error: e instanceof CwsConnectError ? e.code : String(e) })),
  );
});
button.disabled = false;
`,
  'bundler/server.ts': `import { CwsConnectClient, verifyEvent, type ConnectSession, type VerifiedEvent } from '@cws-connect/node-client';

export function sessionFor(client: CwsConnectClient, userId: string): Promise<ConnectSession> {
  // @ts-expect-error returnUrl must be a string
  void client.createConnectSession({ kind: 'user', userId, returnUrl: 1 });
  return client.createConnectSession({ kind: 'user', userId, returnUrl: 'https://partner.example/' });
}

export function connectionOf(headers: Headers, raw: string, secret: string): string | null {
  const event: VerifiedEvent = verifyEvent(headers, raw, secret);
  return event.source === 'service' && 'connectionId' in event.data ? event.data.connectionId : null;
}
`,
};
