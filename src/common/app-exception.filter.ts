import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AppError, ErrorBody, isContractFailure } from './app-error.js';
import { DATABASE_RETRY_AFTER_SECONDS, databaseOutage, isDatabaseUnavailable } from './database-outage.js';
import { requestIdOf } from './request-id.js';
import { hasBody } from './request-body.js';

const HTTP_CODES: Record<number, string> = {
  400: 'validation_failed',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'route_not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
};

const logger = new Logger('AppExceptionFilter');

/** Problems listed in one error answer; the rest are counted (`details.problemCount`). */
export const MAX_PROBLEMS = 10;

/** The one place where errors become HTTP answers: the contract's JSON shape, x-request-id, no leaks. */
@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<Request>();
    const res = http.getResponse<Response>();
    const requestId = requestIdOf(req, res);
    const { status, body, headers } = errorBody(exception, requestId);
    if (status >= 500) logFailure(exception, requestId);
    if (res.headersSent) {
      // A streamed answer already started: the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    // Refused before its body was read (no credential, too large): the rest would be taken for the next request.
    if (!req.complete && hasBody(req)) res.setHeader('connection', 'close');
    res.status(status).setHeader('x-request-id', requestId).json(body);
  }
}

export interface ErrorAnswer {
  status: number;
  body: ErrorBody;
  /** Headers the answer must carry besides content-type and x-request-id (Retry-After on a 503). */
  headers: Record<string, string>;
}

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;
const RETRY_LATER: Record<string, string> = Object.freeze({ 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) }) as Record<
  string,
  string
>;

/**
 * The status, the contract's body and the extra headers for anything thrown while serving a request. Also
 * used by the front door (edge/front-door.ts), which answers without Express. An unreachable
 * database is a 503 with Retry-After (the client should retry), not an internal error; a stored secret that
 * does not open with the configured keys is named as such (docs/operations.md): any ContractFailure answers as it says.
 */
export function errorBody(exception: unknown, requestId: string): ErrorAnswer {
  if (exception instanceof AppError) {
    return {
      status: exception.status,
      body: {
        error: {
          code: exception.code,
          message: exception.message,
          requestId,
          ...(exception.details ? { details: exception.details } : {}),
        },
      },
      headers:
        exception.retryAfterSeconds !== undefined
          ? { 'retry-after': String(exception.retryAfterSeconds) }
          : exception.status === 503
            ? RETRY_LATER
            : NO_HEADERS,
    };
  }
  if (isDatabaseUnavailable(exception)) {
    return {
      status: 503,
      body: { error: { code: 'service_unavailable', message: 'The service cannot reach its database; retry later.', requestId } },
      headers: RETRY_LATER,
    };
  }
  if (isContractFailure(exception)) {
    const { status, code, message } = exception.contractAnswer;
    return { status, body: { error: { code, message, requestId } }, headers: NO_HEADERS };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const response = exception.getResponse();
    const raw = typeof response === 'object' && response !== null ? (response as { message?: unknown }).message : response;
    const all = Array.isArray(raw) ? raw : undefined;
    const messages = all?.slice(0, MAX_PROBLEMS).map(String);
    const more = all && all.length > MAX_PROBLEMS ? `; and ${all.length - MAX_PROBLEMS} more` : '';
    const message = messages ? messages.join('; ') + more : typeof raw === 'string' ? raw : exception.message;
    const code = HTTP_CODES[status] ?? (status >= 500 ? 'internal_error' : 'bad_request');
    return {
      status,
      body: {
        error: {
          code,
          message: status >= 500 ? 'Internal error.' : message,
          requestId,
          ...(messages && all ? { details: { problems: messages, problemCount: all.length } } : {}),
        },
      },
      headers: status === 503 ? RETRY_LATER : NO_HEADERS,
    };
  }
  if (isBodyParserError(exception)) {
    const status = exception.status ?? exception.statusCode ?? 400;
    const code = status === 413 ? 'payload_too_large' : 'validation_failed';
    return {
      status,
      body: {
        error: { code, message: status === 413 ? 'The request body is too large.' : 'The request body is not valid JSON.', requestId },
      },
      headers: NO_HEADERS,
    };
  }
  return {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    body: { error: { code: 'internal_error', message: 'Internal error.', requestId } },
    headers: NO_HEADERS,
  };
}

/**
 * A failure answered with a 5xx: logged with its request id (the log formatter redacts secrets). A database
 * outage is logged once when it begins and then counted (common/database-outage.ts), not once per request;
 * a secret that does not open is one line without a stack (it names the key id, never the value).
 */
export function logFailure(exception: unknown, requestId: string): void {
  if (isDatabaseUnavailable(exception)) {
    databaseOutage.report(exception, 'request');
    return;
  }
  // An answer that asks the client to retry (not ready, shutting down): its cause is logged where it is known.
  if (exception instanceof AppError && exception.status === 503) return;
  if (isContractFailure(exception)) {
    const { fields, message } = exception.logLine();
    logger.error({ requestId, ...fields }, message);
    return;
  }
  logger.error(
    {
      err: exception instanceof Error ? { name: exception.name, message: exception.message, stack: exception.stack } : String(exception),
      requestId,
    },
    'request failed',
  );
}

function isBodyParserError(e: unknown): e is { type: string; status?: number; statusCode?: number } {
  return typeof e === 'object' && e !== null && typeof (e as { type?: unknown }).type === 'string' && 'expose' in e;
}
