import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A new request id. */
export function mintRequestId(): string {
  return randomUUID();
}

/**
 * A request's id: the caller's x-request-id when it is a plain token (so a partner can correlate), otherwise a new
 * one. Called once per request, by the front door (edge/front-door.ts), which sets it as `req.id` for the logger and
 * the exception filters, and on the response before anything else can answer (the facade, with its answer).
 */
export function requestIdFor(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : mintRequestId();
}

/** The request id the front door gave a request. */
export function requestIdOf(req: IncomingMessage, res?: ServerResponse): string {
  const fromReq = (req as IncomingMessage & { id?: unknown }).id;
  if (typeof fromReq === 'string') return fromReq;
  const fromRes = res?.getHeader('x-request-id');
  if (typeof fromRes === 'string') return fromRes;
  // Only a request that did not come through the front door (none in the app) lands here.
  if (!res) return mintRequestId();
  const id = requestIdFor(req);
  res.setHeader('x-request-id', id);
  return id;
}
