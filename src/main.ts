import 'reflect-metadata';
import { describeStartupFailure } from './common/startup-failure.js';
import { type AppConfig, loadConfig } from './config/app-config.js';
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

/** Every start-up failure ends here: one line naming the variable and what to do, exit code 1, no stack. */
function cannotStart(e: unknown, config: AppConfig | null): never {
  console.error(`cws-connect cannot start: ${describeStartupFailure(e, config)}`);
  process.exit(1);
}

async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    cannotStart(e, null);
  }
  assertDecoratorMetadata();
  const started = Date.now();
  let service;
  try {
    service = await startService(config, { log: (m) => console.error(`[cws-connect] ${m}`) });
  } catch (e) {
    cannotStart(e, config);
  }
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

main().catch((e: unknown) => cannotStart(e, null));
