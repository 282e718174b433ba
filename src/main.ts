import 'reflect-metadata';
import { ConfigError, loadConfig } from './config/app-config.js';
import { ApiKeysService } from './tenants/api-keys.service.js';
import { startService } from './service.js';

/** NestJS injection needs decorator metadata; esbuild-based runners (tsx) do not emit it. */
function assertDecoratorMetadata(): void {
  if (!Reflect.getMetadata('design:paramtypes', ApiKeysService)) {
    console.error(
      'cws-connect must run compiled: `npm start`, or `npm run build && node dist/src/main.js`. This TypeScript runner emits no ' +
        'decorator metadata (tsx/esbuild), which NestJS needs. Tests start separate instances with test/support/spawn-app.ts.',
    );
    process.exit(1);
  }
}

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`cws-connect cannot start: ${e.message}`);
      process.exit(1);
    }
    throw e;
  }
  assertDecoratorMetadata();
  const started = Date.now();
  const service = await startService(config, { log: (m) => console.error(`[cws-connect] ${m}`) });
  const { url, sandbox } = service;
  const lines = [
    '',
    `  cws-connect is ready on ${url}  (${Date.now() - started} ms)`,
    `  public URL:    ${config.publicUrl}`,
    `  API docs:      ${url}/docs`,
    `  database:      ${config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL in ${config.dataDir}/postgres`}`,
  ];
  if (sandbox) lines.push(`  CWS sandbox:   ${sandbox.url}  (environment "sandbox")`);
  if (config.operatorKeyGenerated) {
    lines.push(`  operator key:  ${config.operatorApiKey}`, `                 (generated for local use, kept in ${config.dataDir}/secrets.json)`);
  }
  if (config.vaultKeysGenerated) lines.push(`  warning:       VAULT_KEYS is unset; a local vault key was generated in ${config.dataDir}/secrets.json (never do this in production)`);
  // After Nest's start-up log lines, so that the banner is the last thing on the screen.
  setTimeout(() => console.log(lines.join('\n') + '\n'), 100);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`[cws-connect] ${signal}: stopping`);
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((e: unknown) => {
  console.error(`cws-connect failed to start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
