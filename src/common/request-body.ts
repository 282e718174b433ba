import type { IncomingMessage } from 'node:http';

/** Whether a request announces a body (a `Transfer-Encoding`, or a `Content-Length` other than 0). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/** Whether a Content-Type is `application/json` (any parameters, any letter case). */
export function isJsonType(contentType: string | undefined): boolean {
  if (contentType === 'application/json') return true;
  return contentType !== undefined && contentType.split(';')[0].trim().toLowerCase() === 'application/json';
}
