import { NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import { Logger } from 'nestjs-pino';
import { AppModule, AppOptions } from './app.module.js';
import { finishDocument, withBodyParserErrors, withConsoleSessions } from './ops/openapi-document.js';
import { refuseBadUrl, requestBodyParser } from './common/json-body.js';
import type { AppConfig } from './config/app-config.js';
import { withFacadePaths } from './facade/facade-openapi.js';
import { isFacadePath } from './facade/facade-routes.js';
import { createHttpServer, FacadeDoor, FrontDoor } from './facade/front-door.js';
import { createLogging } from './ops/logger.js';
import { ApiKeysService } from './auth/api-keys.service.js';
import { AuthThrottle } from './auth/auth-throttle.js';
import { ConsoleSessionsService } from './auth/console-sessions.service.js';
import { credentialFirst, needsCredential } from './auth/request-credential.js';
import { InboundDoor } from './webhooks/inbound-door.js';
import { withInboundPath } from './webhooks/inbound-openapi.js';

export type CreateAppOptions = AppOptions;

/**
 * Nest's Express adapter, with the one HTTP server built here: its request listener is the front door
 * (facade/front-door.ts), which serves the facade's routes and hands every other request to Express.
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
export async function createApp(config: AppConfig, options: CreateAppOptions = {}): Promise<NestExpressApplication> {
  const adapter = new FrontDoorAdapter(config);
  const logging = createLogging(config, options.logDestination);
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, logging, options), adapter, {
    bodyParser: false,
    bufferLogs: true,
  });
  adapter.door.open(app.get(FacadeDoor), app.get(InboundDoor));
  app.useLogger(app.get(Logger));
  app.set('trust proxy', 'loopback');
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

  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('cws-connect')
      .setDescription(
        'Connects a partner SaaS to the Contract Workflow Service: tenants, OAuth connections, a facade that calls the upstream with the right token, webhooks. Errors are `{"error": {"code", "message", "requestId"}}`.',
      )
      .setVersion('1')
      .addServer('/', 'this service')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'API key', description: 'The operator key or a tenant API key.' })
      .build(),
  );
  SwaggerModule.setup('docs', app, finishDocument(withInboundPath(withFacadePaths(withBodyParserErrors(withConsoleSessions(document))))), {
    jsonDocumentUrl: 'docs-json',
  });
  await app.init();
  return app;
}
