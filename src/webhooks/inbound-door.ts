import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { parseJsonBody, urlProblem } from '../common/json-body.js';
import { readBodyText } from '../common/read-body.js';
import { accessLogLevel } from '../telemetry/logger.js';
import { InboundService } from './inbound.service.js';
import { hasBody, isJsonType } from '../common/request-body.js';

const logger = new Logger('InboundDoor');

/** The largest delivery taken, as the service's JSON body limit (1 MiB). */
export const INBOUND_BODY_LIMIT = 1024 * 1024;

const PREFIX = '/inbound/';
const NOT_BLANK = /\S/;

/** The raw (as sent) path parameters of `POST /inbound/{tenantId}/{receiverId}`. */
export interface InboundTarget {
  tenantId: string;
  receiverId: string;
}

/**
 * The receiver's target when a request is `POST /inbound/{tenantId}/{receiverId}` (one trailing slash
 * allowed, the literal in any letter case, as Express matched it), else null: every other request,
 * another method on this path included, is Express's (404).
 */
export function matchInbound(method: string, url: string): InboundTarget | null {
  if (method !== 'POST' || url.length <= PREFIX.length) return null;
  if (!url.startsWith(PREFIX) && url.slice(0, PREFIX.length).toLowerCase() !== PREFIX) return null;
  const q = url.indexOf('?');
  let path = q < 0 ? url : url.slice(0, q);
  if (path.endsWith('/')) path = path.slice(0, -1);
  const slash = path.indexOf('/', PREFIX.length);
  if (slash <= PREFIX.length || slash === path.length - 1 || path.indexOf('/', slash + 1) !== -1) return null;
  return { tenantId: path.slice(PREFIX.length, slash), receiverId: path.slice(slash + 1) };
}

/**
 * Serves the inbound receiver without Express and NestJS, whose request path cost several times the
 * delivery's own work (docs/webhooks.md, Benchmark). The rules are InboundService's and the service's
 * JSON body rules (common/json-body.ts); errors are the exception filter's mapping (errorBody).
 */
@Injectable()
export class InboundDoor {
  constructor(private readonly inbound: InboundService) {}

  async serve(
    req: IncomingMessage,
    res: ServerResponse,
    target: InboundTarget,
    requestId: string,
    answerError: (e: unknown) => void,
  ): Promise<void> {
    const started = performance.now();
    try {
      const problem = urlProblem(req.url ?? '');
      if (problem) throw new AppError('validation_failed', problem);
      const contentType = req.headers['content-type'];
      // Read only a JSON body: anything else is refused by `accept` (401 before 415) without reading it.
      const text = isJsonType(contentType) && hasBody(req) ? await readBodyText(req, contentType, INBOUND_BODY_LIMIT) : undefined;
      const body = text === undefined ? undefined : parseJsonBody(text);
      // A blank body parses as {}: its text is no JSON value to store as is.
      const stored = text !== undefined && NOT_BLANK.test(text) ? text : undefined;
      const { id } = await this.inbound.accept(
        decodeURIComponent(target.tenantId),
        decodeURIComponent(target.receiverId),
        req.headers.authorization,
        {
          contentType,
          body,
          json: stored,
        },
      );
      const json = `{"id":"${id}"}`;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': json.length }).end(json);
    } catch (e) {
      const { status } = errorBody(e, requestId);
      if (status >= 500) logFailure(e, requestId);
      answerError(e);
      // As the facade's routes: no access line for a success (one per delivery cost more than the delivery's own work), one for an error.
      const level = accessLogLevel(status);
      if (level !== 'info')
        logger[level]({ req, res, route: 'receiveDelivery', responseTime: Math.round(performance.now() - started) }, 'request completed');
    }
  }
}
