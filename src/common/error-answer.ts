import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody } from './app-exception.filter.js';
import { hasBody } from './request-body.js';

/** The contract's error answer, written with node:http. */
export function answerError(req: IncomingMessage, res: ServerResponse, e: unknown, requestId: string): void {
  const { status, body, headers: extra } = errorBody(e, requestId);
  const json = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    ...extra,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
  };
  // Refused before its body was read: the rest of that body would be taken for the next request on the connection.
  if (hasBody(req) && !req.complete) headers.connection = 'close';
  res.writeHead(status, headers).end(json);
}
