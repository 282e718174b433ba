import type { NestExpressApplication } from '@nestjs/platform-express';
import { SandboxServer } from 'cws-sandbox';
import type { DestinationStream } from 'pino';
import { createApp } from './app.factory.js';
import type { Clock } from './common/clock.js';
import type { AppConfig } from './config/app-config.js';
import type { EmbeddedDatabase } from './database/embedded-postgres.js';
import { openDatabase } from './database/open-database.js';
import { ConnectionWatch, drain } from './drain.js';
import { withSandboxEnvironment } from './sandbox-environment.js';

// The one way to build cws-connect: the server (main.ts) and the tests (test/support/test-app.ts) start it
// here; the CLI (cli/cli-runtime.ts) opens the database the same way (database/open-database.ts).

export interface RunningService {
  config: AppConfig;
  app: NestExpressApplication;
  url: string;
  sandbox: SandboxServer | null;
  /** Closes everything at once (tests; a failed start). */
  stop(): Promise<void>;
  /** The drain of a SIGTERM (drain.ts), then stop(); `log` gets one line per step. */
  drain(log: (msg: string) => void): Promise<void>;
}

export interface ServiceOptions {
  log?: (msg: string) => void;
  /** Where log lines go (tests collect them); stdout when unset. */
  logDestination?: DestinationStream;
  clock?: Clock;
  /** The address to listen on (default every interface). */
  host?: string;
}

/**
 * Everything `npm start` does: the database (openDatabase), the in-process sandbox when SANDBOX=on, the app,
 * then the HTTP server on PORT.
 */
export async function startService(base: AppConfig, options: ServiceOptions = {}): Promise<RunningService> {
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
    const opened = await openDatabase(base, log);
    embedded = opened.embedded;
    const { applied } = opened;
    let config = opened.config;
    if (applied.length) log(`applied ${applied.length} migration${applied.length === 1 ? '' : 's'}, the last ${applied.at(-1)}`);

    if (config.sandbox.enabled) {
      // The sandbox's own defaults (its client id, scopes, token lifetime) reach the service only from here.
      sandbox = await SandboxServer.start({
        port: config.sandbox.port,
        clientSecret: config.sandbox.clientSecret,
        redirectUris: [`${config.publicUrl}/oauth/callback`],
        ...(config.sandbox.accessTokenTtlSeconds === null ? {} : { accessTokenTtlSeconds: config.sandbox.accessTokenTtlSeconds }),
        seedWorkflows: true,
      });
      config = withSandboxEnvironment(config, sandbox);
    }

    app = await createApp(config, { logDestination: options.logDestination, clock: options.clock });
    const built = app;
    const watch = new ConnectionWatch(app.getHttpServer());
    const host = options.host ?? '0.0.0.0';
    await app.listen(config.port, host);
    const address = app.getHttpServer().address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    return {
      config,
      app,
      url: `http://${host === '0.0.0.0' ? 'localhost' : host}:${port}`,
      sandbox,
      stop,
      drain: (drainLog) => drain(built, watch, config, drainLog, stop),
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
