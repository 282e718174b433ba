import { NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { SandboxServer } from 'cws-sandbox';
import express from 'express';
import { Logger } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { AppModule } from './app.module.js';
import { ApiKeysService } from './auth/api-keys.service.js';
import { AuthThrottle } from './auth/auth-throttle.js';
import { ClientAddress } from './auth/client-address.js';
import { ConsoleSessionsService } from './auth/console-sessions.service.js';
import { credentialFirst, needsCredential } from './auth/request-credential.js';
import type { Clock } from './common/clock.js';
import { refuseBadUrl, requestBodyParser } from './common/json-body.js';
import type { AppConfig } from './config/app-config.js';
import type { EmbeddedDatabase } from './database/embedded-postgres.js';
import { openDatabase, type OpenedDatabase } from './database/open-database.js';
import { ConnectionWatch, drain } from './drain.js';
import { withFacadePaths } from './facade/facade-openapi.js';
import { isFacadePath } from './facade/facade-routes.js';
import { FrontDoor } from './edge/front-door.js';
import { createHttpServer } from './edge/http-server.js';
import { FacadeDoor } from './facade/facade-door.js';
import { createLogging } from './telemetry/logger.js';
import { serveApiDocs } from './ops/openapi-document.js';
import { InboundDoor } from './webhooks/inbound-door.js';
import { withInboundPath } from './webhooks/inbound-openapi.js';
import { sandboxQuotas, withSandboxEnvironment } from './sandbox-environment.js';
import { McpDoor } from './agents/mcp-door.js';
import { withMcpPaths } from './agents/mcp-openapi.js';

// The one way to build cws-connect, read top-down: startService (the database, the sandbox, the app, the
// listener), then buildApp (Nest's app on the front door's HTTP server, the middleware before the routes, the
// OpenAPI document); AppModule (app.module.ts) is the module graph. The server (main.ts) and the tests
// (test/support/test-app.ts) start it here; the CLI (cli/cli-runtime.ts) opens the database the same way.

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
  /** The database's opening when already under way (main.ts starts it before it loads the app); else started here. */
  database?: Promise<OpenedDatabase>;
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
    const opened = await (options.database ?? openDatabase(base, log));
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
        quotas: sandboxQuotas(config.sandbox.quotas),
      });
      config = withSandboxEnvironment(config, sandbox);
    }

    app = await buildApp(config, options);
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

/**
 * Nest's Express adapter, with the one HTTP server built here: its request listener is the front door
 * (edge/front-door.ts), which serves the facade's routes and hands every other request to Express.
 */
class FrontDoorAdapter extends ExpressAdapter {
  readonly door: FrontDoor;

  constructor(private readonly config: AppConfig) {
    const instance = express();
    super(instance);
    this.door = new FrontDoor(instance);
  }

  override initHttpServer(): void {
    this.setHttpServer(createHttpServer(this.config, this.door.listener));
  }
}

/** The app, initialised; `app.listen` starts its server (`app.getHttpServer()`), `app.close` stops both. */
async function buildApp(config: AppConfig, options: ServiceOptions): Promise<NestExpressApplication> {
  const adapter = new FrontDoorAdapter(config);
  const logging = createLogging(config, options.logDestination);
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, logging, options), adapter, {
    bodyParser: false,
    bufferLogs: true,
  });
  adapter.door.open(app.get(FacadeDoor), app.get(InboundDoor));
  app.useLogger(app.get(Logger));
  app.set('trust proxy', app.get(ClientAddress).trust); // TRUST_PROXY: req.ip is the throttle's client
  app.disable('x-powered-by');
  // No ETag on JSON answers (a SHA-1 of every body, for conditional GETs the API does not offer).
  app.set('etag', false);
  app.use(logging.accessLog); // Express's routes; the front door logs its own (facade-routes.ts, `log`)
  app.use(refuseBadUrl);
  // The credential before the body, then the body within its route kind's bounds (docs/security.md).
  app.use(credentialFirst({ keys: app.get(ApiKeysService), sessions: app.get(ConsoleSessionsService), throttle: app.get(AuthThrottle) }));
  app.use(
    // A facade route's path (with a method no route takes: Express answers 404) keeps its body unread.
    requestBodyParser((url) => (isFacadePath(url) ? 'unread' : needsCredential(url) ? 'api' : 'public')),
  );
  const document = serveApiDocs(app, [withFacadePaths, withInboundPath, withMcpPaths]);
  adapter.door.openMcp(app.get(McpDoor), document);
  await app.init();
  return app;
}
