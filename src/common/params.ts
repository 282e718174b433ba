import { ParseUUIDPipe } from '@nestjs/common';
import { AppError, type ErrorCode } from './app-error.js';

/** A tenant id: a lower-case slug of at most 63 characters (the tenants' routes, the audit trail's filter). */
export const TENANT_ID = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A path parameter that must be a UUID: anything else names nothing, so it is the resource's not-found error. */
export function uuidParam(code: ErrorCode, message: string): ParseUUIDPipe {
  return new ParseUUIDPipe({ exceptionFactory: () => new AppError(code, message) });
}

/** A connection id in a path (the connections and renewal routes). */
export const connectionIdPipe = uuidParam('connection_not_found', 'No such connection.');
