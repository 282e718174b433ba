import 'reflect-metadata';
import { constants as osConstants } from 'node:os';
import { describeStartupFailure } from './startup-failure.js';
import { type AppConfig, loadConfig } from './config/app-config.js';
import { openDatabase } from './database/open-database.js';
import { buildInfo } from './telemetry/build-info.js';
import { startupLogger } from './telemetry/logger.js';
import type { RunningService } from './service.js';
import { boundUploadGarbage } from './upload-garbage.js';

/** NestJS injection needs decorator metadata; esbuild-based runners (tsx) do not emit it. */
async function assertDecoratorMetadata(): Promise<void> {
  const { ApiKeysService } = await import('./auth/api-keys.service.js');
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
  boundUploadGarbage();
  let config: AppConfig;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    cannotStart(e, null);
  }
  const log = startupLogger(config);
  const info = (m: string) => log.info(m);
  // The database first, up to its first long step in a process of its own (the embedded PostgreSQL's initdb on a
  // first start, its server's start on the next), then the app's modules load while it runs: they are most of a
  // start's CPU, and need no database.
  let launched!: () => void;
  const underway = new Promise<void>((resolve) => (launched = resolve));
  const database = openDatabase(config, info, () => launched());
  const settled = database.then(
    () => undefined,
    () => undefined, // startService awaits it again and reports the failure
  );
  await Promise.race([underway, settled]);
  let service: RunningService;
  try {
    const { startService } = await import('./service.js');
    await assertDecoratorMetadata();
    service = await startService(config, { log: info, database });
  } catch (e) {
    await database.then(({ embedded }) => embedded?.stop()).catch(() => undefined);
    cannotStart(e, config);
  }
  process.stdout.write(banner(config, service) + '\n');

  // The first signal drains (drain.ts); a second one exits at once, with 128 + its number as a shell would report.
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn(`${signal} again: exiting at once without finishing the drain`);
      process.exit(128 + (osConstants.signals[signal] ?? 0));
    }
    stopping = true;
    log.info(`${signal}: stopping, draining first`);
    service
      .drain((m) => log.info(m))
      .then(
        () => process.exit(0),
        (e: unknown) => {
          log.error({ error: e instanceof Error ? e.message : String(e) }, 'the drain failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/** What a person starting the service needs, in a few lines: where it is, where its data is, how to get in. */
function banner(config: AppConfig, { url, sandbox }: RunningService): string {
  const { version, commit } = buildInfo();
  const lines = [`cws-connect is ready on ${url}  (started in ${process.uptime().toFixed(1)} s; version ${version}, commit ${commit})`];
  if (config.publicUrl !== url) lines.push(`  public URL:    ${config.publicUrl}`);
  lines.push(`  API docs:      ${url}/docs`);
  if (config.databaseUrl) lines.push('  database:      PostgreSQL at DATABASE_URL');
  // DATA_DIR holds the embedded PostgreSQL (binaries too, when copied for the postgres user) and the generated keys.
  const local = !config.databaseUrl || config.vaultKeysGenerated || config.operatorKeyGenerated || config.sandbox.enabled;
  if (local) lines.push(`  local data:    ${config.dataDir}  (delete it to start afresh)`);
  if (sandbox) lines.push(`  CWS sandbox:   ${sandbox.url}  (environment "sandbox")`);
  if (config.operatorKeyGenerated) lines.push(`  operator key:  ${config.operatorApiKey}`);
  const unset = [config.vaultKeysGenerated && 'VAULT_KEYS', config.operatorKeyGenerated && 'OPERATOR_API_KEY'].filter(Boolean);
  if (unset.length) lines.push(`  warning:       ${unset.join(', ')} unset: generated for local use only`);
  return lines.join('\n');
}

main().catch((e: unknown) => cannotStart(e, null));
