// A separate program (`npm run sandbox`): the one place in the sandbox that reads process.env.
import { SandboxServer } from './sandbox-server.js';
import type { SandboxOptions, SandboxQuotas } from './types.js';

function options(env: NodeJS.ProcessEnv): SandboxOptions {
  const int = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
    return Number(raw);
  };
  const list = (name: string, separator: RegExp): string[] | undefined => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return undefined;
    return raw
      .split(separator)
      .map((s) => s.trim())
      .filter(Boolean);
  };
  return {
    port: int('SANDBOX_PORT') ?? 4010,
    clientId: env.SANDBOX_CLIENT_ID || undefined,
    clientSecret: env.SANDBOX_CLIENT_SECRET || undefined,
    redirectUris: list('SANDBOX_REDIRECT_URIS', /,/) ?? ['http://localhost:3000/oauth/callback'],
    // Scopes may be separated by commas or spaces.
    scopes: list('SANDBOX_SCOPES', /[,\s]+/),
    accessTokenTtlSeconds: int('SANDBOX_TOKEN_TTL_SECONDS'),
    recordLimit: int('SANDBOX_RECORD_LIMIT'),
    seedWorkflows: true,
    quotas: quotas(env.SANDBOX_QUOTAS),
    listing: { pageSize: int('SANDBOX_PAGE_SIZE') ?? null },
  };
}

/** SANDBOX_QUOTAS: `read=400/60s,write=40/60s` (windows in seconds). */
function quotas(raw: string | undefined): SandboxQuotas | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const out: SandboxQuotas = {};
  for (const pair of raw.split(',')) {
    const m = /^\s*(read|write)=(\d+)\/(\d+)s\s*$/.exec(pair);
    if (!m) throw new Error(`SANDBOX_QUOTAS must be read=<calls>/<seconds>s,write=<calls>/<seconds>s, got ${JSON.stringify(raw)}`);
    out[m[1] as 'read' | 'write'] = { calls: Number(m[2]), windowSeconds: Number(m[3]) };
  }
  return out;
}

async function main(): Promise<void> {
  const sandbox = await SandboxServer.start(options(process.env));
  console.log(`CWS sandbox listening on ${sandbox.url}`);
  console.log(`  authorize:     ${sandbox.url}/oauth/authorize`);
  console.log(`  client id:     ${sandbox.clientId}`);
  console.log(`  client secret: ${sandbox.clientSecret}`);
  console.log(`  scopes:        ${sandbox.scopes.join(' ')}`);
  console.log(
    `  users:         ${sandbox
      .users()
      .map((u) => u.id + (u.isAdmin ? ' (admin)' : ''))
      .join(', ')}`,
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping the sandbox`);
    sandbox.close().then(
      () => process.exit(0),
      (e: unknown) => {
        console.error(e);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
