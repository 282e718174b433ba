import { ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import { Logger } from 'nestjs-pino';
import { AppModule, AppOptions } from './app.module.js';
import { AppExceptionFilter } from './common/app-exception.filter.js';
import { formBodyParser, jsonBodyParser, refuseBadUrl } from './common/json-body.js';
import type { AppConfig } from './config/app-config.js';
import { FacadeFastLane } from './facade/fast-lane.js';

/**
 * Paths whose bodies are streamed to the upstream untouched: no body parser may read them first.
 * Everything else gets a JSON parser with a modest limit.
 */
const STREAMED_PATHS = /^\/v1\/tenants\/[^/]+\/(workflows|proxy)(\/|\?|$)/;

export interface CreateAppOptions extends AppOptions {
  /**
   * Serve the facade's routes through FacadeFastLane, in front of Express (default true). Off, the same
   * routes go through Express and FacadeController: the test that holds both to the same answers uses it.
   */
  facadeFastLane?: boolean;
}

export async function createApp(config: AppConfig, options: CreateAppOptions = {}): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, options), {
    bodyParser: false,
    bufferLogs: true,
  });
  app.useLogger(app.get(Logger));
  app.set('trust proxy', 'loopback');
  app.disable('x-powered-by');
  // No ETag on JSON answers (a SHA-1 of every body, for conditional GETs the API does not offer); the
  // facade's fast lane answers errors without Express, and the two paths give the same headers.
  app.set('etag', false);
  if (options.facadeFastLane !== false) app.get(FacadeFastLane).install(app.getHttpServer());
  const json = jsonBodyParser({ limit: '1mb' });
  const form = formBodyParser({ limit: '64kb' });
  app.use(refuseBadUrl);
  app.use((req: express.Request, res: express.Response, next: express.NextFunction) => {
    if (STREAMED_PATHS.test(req.url)) return next();
    json(req, res, (err?: unknown) => (err ? next(err) : form(req, res, next)));
  });
  app.useGlobalFilters(new AppExceptionFilter());
  app.useGlobalPipes(
    new ValidationPipe({
      whitelist: true,
      forbidNonWhitelisted: true,
      transform: true,
      stopAtFirstError: false,
    }),
  );

  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('cws-connect')
      .setDescription(
        'Connects a partner SaaS to the Contract Workflow Service: tenants, OAuth connections, a facade that calls the upstream with the right token, webhooks. Errors are `{"error": {"code", "message", "requestId"}}`.',
      )
      .setVersion('1')
      .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'The operator key or a tenant API key.' })
      .build(),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs-json' });
  return app;
}
