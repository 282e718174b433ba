import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AppError, ErrorBody } from './app-error.js';
import { requestIdOf } from './request-id.js';

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

/** The one place where errors become HTTP answers: the contract's JSON shape, x-request-id, no leaks. */
@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<Request>();
    const res = http.getResponse<Response>();
    const requestId = requestIdOf(req, res);
    const { status, body } = errorBody(exception, requestId);
    if (status >= 500) logFailure(exception, requestId);
    if (res.headersSent) {
      // A streamed answer already started: the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    res.status(status).setHeader('x-request-id', requestId).json(body);
  }
}

/**
 * The status and the contract's body for anything thrown while serving a request. Also used by the
 * facade's front door (facade/front-door.ts), which answers without Express.
 */
export function errorBody(exception: unknown, requestId: string): { status: number; body: ErrorBody } {
  if (exception instanceof AppError) {
    return {
      status: exception.status,
      body: { error: { code: exception.code, message: exception.message, requestId, ...(exception.details ? { details: exception.details } : {}) } },
    };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const response = exception.getResponse();
    const raw = typeof response === 'object' && response !== null ? (response as { message?: unknown }).message : response;
    const messages = Array.isArray(raw) ? raw.map(String) : undefined;
    const message = messages ? messages.join('; ') : typeof raw === 'string' ? raw : exception.message;
    const code = HTTP_CODES[status] ?? (status >= 500 ? 'internal_error' : 'bad_request');
    return {
      status,
      body: { error: { code, message: status >= 500 ? 'Internal error.' : message, requestId, ...(messages ? { details: { problems: messages } } : {}) } },
    };
  }
  if (isBodyParserError(exception)) {
    const status = exception.status ?? exception.statusCode ?? 400;
    const code = status === 413 ? 'payload_too_large' : 'validation_failed';
    return { status, body: { error: { code, message: status === 413 ? 'The request body is too large.' : 'The request body is not valid JSON.', requestId } } };
  }
  return {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    body: { error: { code: 'internal_error', message: 'Internal error.', requestId } },
  };
}

/** A failure answered with a 5xx: logged with its request id (the log formatter redacts secrets). */
export function logFailure(exception: unknown, requestId: string): void {
  logger.error(
    { err: exception instanceof Error ? { name: exception.name, message: exception.message, stack: exception.stack } : String(exception), requestId },
    'request failed',
  );
}

function isBodyParserError(e: unknown): e is { type: string; status?: number; statusCode?: number } {
  return typeof e === 'object' && e !== null && typeof (e as { type?: unknown }).type === 'string' && 'expose' in e;
}
