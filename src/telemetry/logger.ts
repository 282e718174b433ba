import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Params } from 'nestjs-pino';
import { pinoHttp, type HttpLogger, type Options as HttpOptions } from 'pino-http';
import { pino, type DestinationStream, type LevelWithSilent, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import { requestIdOf } from '../common/request-id.js';
import type { AppConfig } from '../config/app-config.js';
import { redactSecrets, redactUrl } from './log-redaction.js';

/** Nest's own start-up lines (modules initialised, routes mapped): debug, not what a person starting the service needs. */
const NEST_STARTUP_CONTEXTS = new Set(['NestFactory', 'InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestApplication']);

function isNestStartup(first: unknown): boolean {
  const context = typeof first === 'object' && first !== null ? (first as { context?: unknown }).context : undefined;
  return typeof context === 'string' && NEST_STARTUP_CONTEXTS.has(context);
}

const INFO = 30;
const hooks = {
  logMethod(this: Logger, args: Parameters<Logger['info']>, method: Logger['info'], level: number) {
    if (level === INFO && isNestStartup(args[0])) return this.debug(...args);
    return method.apply(this, args);
  },
};

/**
 * Where log lines go by default: stdout, as JSON (LOG_FORMAT=json, the default when stdout is not a
 * terminal), or as one readable line each through pino-pretty (LOG_FORMAT=pretty, the default on a terminal).
 */
export function logStream(config: AppConfig, out: number | NodeJS.WritableStream = 1): DestinationStream | undefined {
  if (config.logFormat === 'json') return undefined;
  // Loaded only for a terminal: JSON output, the production case, does without it.
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  return pretty({
    destination: out,
    sync: true,
    colorize: out === 1 && process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname,instance,context,req,res,responseTime',
    messageFormat: '{if context}{context}: {end}{msg}',
    singleLine: true,
  });
}

/** The service's own lines before and after the Nest app (embedded database, migrations, shutdown). */
export function startupLogger(config: AppConfig): Logger {
  return pino(
    { level: config.logLevel as LevelWithSilent, base: { instance: config.instanceId }, hooks },
    logStream(config) ?? pino.destination(1),
  );
}

/**
 * Structured logs. Secrets are removed twice: pino's path redaction for the headers we know of,
 * and a walk over every logged object that censors any field named like a token, secret or key.
 */
/**
 * The level of a request's access line, for Express's routes and the front door's alike. A 503 is an expected
 * answer during a database outage, whose cause is logged once (common/database-outage.ts); a 429 is a tenant
 * meeting its bound, which would otherwise flood the log with the flood itself.
 */
export function accessLogLevel(status: number, failed = false): 'info' | 'warn' | 'error' {
  if (status === 503 || status === 429) return 'info';
  if (failed || status >= 500) return 'error';
  return status >= 400 ? 'warn' : 'info';
}

/** Express's access log (pino-http) and the Nest logger's parameters (nestjs-pino), on one pino logger. */
export interface Logging {
  accessLog: HttpLogger;
  params: Params;
}

/**
 * The access log is mounted by the app itself (service.ts, `buildApp`), not by nestjs-pino: nestjs-pino's middleware
 * runs each request inside an AsyncLocalStorage, and Node 20 implements that with async hooks which, once
 * enabled by the first request, run on every promise of the process, the front door's proxied calls included.
 * Lines logged inside a request therefore do not carry its id by themselves: error lines name it explicitly
 * (common/app-exception.filter.ts), and the access line of every request has it.
 */
export function createLogging(config: AppConfig, destination?: DestinationStream): Logging {
  const [options, stream] = accessLogOptions(config, destination);
  const accessLog = stream ? pinoHttp(options, stream) : pinoHttp(options);
  return { accessLog, params: { pinoHttp: { logger: accessLog.logger }, forRoutes: [] } };
}

/** pino-http's options and destination (stdout when undefined). */
export function accessLogOptions(config: AppConfig, destination?: DestinationStream): [HttpOptions, DestinationStream | undefined] {
  const readable = !destination && config.logFormat === 'pretty';
  const options: HttpOptions = {
    level: config.logLevel,
    hooks,
    // The front door (edge/front-door.ts) gave every request its id before Express saw it.
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
      res: (res: { statusCode?: number; headers?: Record<string, unknown> }) => ({
        statusCode: res.statusCode,
        headers: redactSecrets(res.headers),
      }),
    },
    formatters: {
      log: (object: Record<string, unknown>) => redactSecrets(object) as Record<string, unknown>,
    },
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) => accessLogLevel(res.statusCode, err !== undefined),
    autoLogging: { ignore: (req: IncomingMessage) => req.url === '/health/live' || req.url === '/metrics' },
    base: { instance: config.instanceId },
    // Readable lines say what happened in the message itself; JSON keeps it in req and res.
    ...(readable && {
      customSuccessMessage: (req: IncomingMessage, res: ServerResponse, ms: number) =>
        `${req.method} ${redactUrl(req.url)} ${res.statusCode} ${Math.round(ms)} ms`,
      customErrorMessage: (req: IncomingMessage, res: ServerResponse, err: Error) =>
        `${req.method} ${redactUrl(req.url)} ${res.statusCode} ${err.message}`,
    }),
  };
  // The facade's routes never reach Express (and so pino-http): the front door serves them and logs them
  // as their route table entry says (facade/facade-routes.ts, `log`).
  return [options, destination ?? logStream(config)];
}
