import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { errorBody, logFailure } from '../common/app-exception.filter.js';
import { parseJsonBody, urlProblem } from '../common/json-body.js';
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
      const text = isJsonType(contentType) && hasBody(req) ? await readText(req, contentType) : undefined;
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

/**
 * The body as text, at most INBOUND_BODY_LIMIT bytes after decompression (413 past it, or at once when
 * Content-Length says so); gzip, deflate and br are inflated, UTF-8 is the only charset (415 otherwise),
 * as the service's JSON body parser reads them.
 */
function readText(req: IncomingMessage, contentType: string | undefined): Promise<string> {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1].toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return Promise.reject(new AppError('unsupported_media_type', `The charset ${charset} is not supported; send UTF-8.`));
  }
  if (Number(req.headers['content-length'] ?? 0) > INBOUND_BODY_LIMIT) return Promise.reject(tooLarge());
  const stream = decoded(req);
  if (stream === null)
    return Promise.reject(new AppError('unsupported_media_type', 'The content-encoding is not supported (gzip, deflate, br or none).'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > INBOUND_BODY_LIMIT) {
        stream.removeAllListeners('data');
        stream.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => resolve((chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8')));
    stream.once('error', () =>
      reject(new AppError('validation_failed', 'The request body could not be read (aborted, or not validly compressed).')),
    );
    if (stream !== req)
      req.once('aborted', () => reject(new AppError('validation_failed', 'The request body could not be read (aborted).')));
  });
}

function decoded(req: IncomingMessage): Readable | null {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity') return req;
  if (encoding === 'gzip' || encoding === 'x-gzip') return req.pipe(createGunzip());
  if (encoding === 'deflate') return req.pipe(createInflate());
  if (encoding === 'br') return req.pipe(createBrotliDecompress());
  return null;
}

function tooLarge(): AppError {
  return new AppError('payload_too_large', 'The request body is too large.');
}
