import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestMethod } from '@nestjs/common';
import type { Params } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { assignRequestId } from '../common/request-id.js';
import type { AppConfig } from '../config/app-config.js';
import { redactSecrets, redactUrl } from './log-redaction.js';

/**
 * Structured JSON logs. Secrets are removed twice: pino's path redaction for the headers we know of,
 * and a walk over every logged object that censors any field named like a token, secret or key.
 */
export function loggerParams(config: AppConfig, destination?: DestinationStream): Params {
  const options = {
    level: config.logLevel,
    genReqId: (req: IncomingMessage, res: ServerResponse) => assignRequestId(req, res),
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]', 'res.headers["set-cookie"]'],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: { id?: unknown; method?: string; url?: string; headers?: Record<string, unknown> }) => ({
        id: req.id,
        method: req.method,
        url: redactUrl(req.url),
        headers: redactSecrets(req.headers),
      }),
      res: (res: { statusCode?: number; headers?: Record<string, unknown> }) => ({ statusCode: res.statusCode, headers: redactSecrets(res.headers) }),
    },
    formatters: {
      log: (object: Record<string, unknown>) => redactSecrets(object) as Record<string, unknown>,
    },
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
      err || res.statusCode >= 500 ? ('error' as const) : res.statusCode >= 400 ? ('warn' as const) : ('info' as const),
    autoLogging: { ignore: (req: IncomingMessage) => req.url === '/health/live' || req.url === '/metrics' },
    base: { instance: config.instanceId },
  };
  // Facade calls (the proxy's hot path) get no per-request access line: pino-http's child logger and
  // serializers alone cost most of a proxied call. Most never reach Express (facade/fast-lane.ts); this
  // covers those that do. Their errors are still logged (logFailure, as in AppExceptionFilter), and
  // FacadeService or the fast lane sets x-request-id.
  const facade = ['workflows', 'workflows/*path', 'me', 'proxy/*path'].map((p) => ({ path: `v1/tenants/:tenantId/${p}`, method: RequestMethod.ALL }));
  return { pinoHttp: destination ? [options, destination] : options, exclude: facade };
}
