import 'reflect-metadata';
import { type CliCommand, CliRuntime } from './cli/cli-runtime.js';
import { keysCommand } from './cli/keys.command.js';
import { migrateCommand } from './cli/migrate.command.js';
import { vaultReencryptCommand } from './cli/vault-reencrypt.command.js';
import { type AppConfig, loadConfig } from './config/app-config.js';
import { ConfigError } from './config/config-error.js';

/** Every operator command; a new one is a CliCommand in src/cli/ and one line here. */
const COMMANDS: readonly CliCommand[] = [migrateCommand, vaultReencryptCommand, keysCommand];

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length), 'help'.length) + 2;
  return [
    'usage: npm run cli -- <command> [arguments]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    `  ${'help'.padEnd(width)}show this help`,
    '',
    'Configuration comes from the environment, as for the server (DATABASE_URL, VAULT_KEYS, DATA_DIR, ...).',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === 'help' || name === '--help' || name === '-h') {
    console.log(usage());
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    console.error(`${name ? `cws-connect: unknown command "${name}"\n\n` : ''}${usage()}`);
    return 1;
  }

  let config: AppConfig;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`cws-connect: ${e.message}`);
      return 1;
    }
    throw e;
  }

  const stop = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) process.exit(130);
    console.error('\n[cws-connect] stopping at the next safe point (press Ctrl-C again to quit at once)');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const runtime = await CliRuntime.start(config, stop.signal);
  try {
    return await command.run(runtime, args);
  } finally {
    await runtime.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`cws-connect: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
