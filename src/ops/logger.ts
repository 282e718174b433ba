import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Params } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import { requestIdOf } from '../common/request-id.js';
import type { AppConfig } from '../config/app-config.js';
import { redactSecrets, redactUrl } from './log-redaction.js';

/**
 * Structured JSON logs. Secrets are removed twice: pino's path redaction for the headers we know of,
 * and a walk over every logged object that censors any field named like a token, secret or key.
 */
export function loggerParams(config: AppConfig, destination?: DestinationStream): Params {
  const options = {
    level: config.logLevel,
    // The front door (facade/front-door.ts) gave every request its id before Express saw it.
    genReqId: (req: IncomingMessage, res: ServerResponse) => requestIdOf(req, res),
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
    },
    formatters: {
      log: (object: Record<string, unknown>) => redactSecrets(object) as Record<string, unknown>,
    },
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
      err || res.statusCode >= 500 ? ('error' as const) : res.statusCode >= 400 ? ('warn' as const) : ('info' as const),
    autoLogging: { ignore: (req: IncomingMessage) => req.url === '/health/live' || req.url === '/metrics' },
    base: { instance: config.instanceId },
  };
  // The facade's routes never reach Express (and so pino-http): the front door serves them and logs them
  // as their route table entry says (facade/facade-routes.ts, `log`).
  return { pinoHttp: destination ? [options, destination] : options };
}
