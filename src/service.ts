import type { NestExpressApplication } from '@nestjs/platform-express';
import type { DestinationStream } from 'pino';
import { createApp } from './app.factory.js';
import type { AppConfig } from './config/app-config.js';
import { runMigrations } from './database/migrate.js';
import { EmbeddedDatabase, startEmbeddedPostgres } from './database/embedded-postgres.js';
import { SandboxServer } from './sandbox/sandbox-server.js';

export interface RunningService {
  config: AppConfig;
  app: NestExpressApplication;
  url: string;
  sandbox: SandboxServer | null;
  stop(): Promise<void>;
}

/**
 * Everything `npm start` does before and around the Nest app: the embedded database when no
 * DATABASE_URL is given, migrations, the in-process sandbox when SANDBOX=on, then the HTTP server.
 */
export async function startService(
  base: AppConfig,
  options: { log?: (msg: string) => void; logDestination?: DestinationStream } = {},
): Promise<RunningService> {
  const log = options.log ?? (() => undefined);
  let embedded: EmbeddedDatabase | null = null;
  let sandbox: SandboxServer | null = null;
  let app: NestExpressApplication | null = null;
  const stop = async () => {
    await app?.close().catch(() => undefined);
    await sandbox?.close().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
  };
  try {
    let databaseUrl = base.databaseUrl;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres(base.dataDir, log);
      databaseUrl = embedded.url;
    }
    const config: AppConfig = Object.freeze({ ...base, databaseUrl });
    const applied = await runMigrations(databaseUrl);
    if (applied.length) log(`applied ${applied.length} migration${applied.length === 1 ? '' : 's'}, the last ${applied.at(-1)}`);

    const sandboxEnv = config.environments.sandbox;
    if (config.sandbox.enabled && sandboxEnv) {
      sandbox = await SandboxServer.start({
        port: config.sandbox.port,
        clientId: sandboxEnv.clientId,
        clientSecret: sandboxEnv.clientSecret,
        redirectUris: [`${config.publicUrl}/oauth/callback`],
        scopes: sandboxEnv.scopes,
        accessTokenTtlSeconds: config.sandbox.accessTokenTtlSeconds,
        seedWorkflows: true,
      });
    }

    app = await createApp(config, { logDestination: options.logDestination });
    await app.listen(config.port, '0.0.0.0');
    const address = app.getHttpServer().address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    return { config, app, url: `http://localhost:${port}`, sandbox, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
