import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { ConsoleSessionsService } from './console-sessions.service.js';
import { bearerOf, type ApiKeysService } from './api-keys.service.js';
import type { AuthThrottle } from './auth-throttle.js';
import type { Principal } from './auth.decorators.js';

/** Who a request is, before the tenant rule: an API key's principal, or the operator through a console session. */
export interface Credential {
  principal: Principal;
  viaConsole: boolean;
}

// One check per request: the pre-body check below and the guard share its outcome (and its database round trip).
const checked = new WeakMap<IncomingMessage, Promise<Credential>>();

/**
 * The request's credential: a console session (cookie and CSRF token) when it offers one and no
 * Authorization header, else its bearer key (ApiKeysService.authenticate). Rejects with the domain error
 * (401, or 403 for a session without its CSRF token), or `429` for a wrong one while the client has failed too
 * often (AuthThrottle.apiCredential: a right one passes). Memoised per request.
 */
export function credentialOf(req: Request, auth: CredentialCheckers): Promise<Credential> {
  let credential = checked.get(req);
  if (credential === undefined) {
    credential = auth.throttle.apiCredential(req, (pastBound) =>
      auth.sessions.presentedBy(req)
        ? auth.sessions.authorize(req, false, pastBound).then((principal) => ({ principal, viaConsole: true }))
        : auth.keys.authenticate(bearerOf(req.headers.authorization), pastBound).then((principal) => ({ principal, viaConsole: false })),
    );
    checked.set(req, credential);
  }
  return credential;
}

/** What checks a credential: the API keys, the console's sessions, the limiter of failures. */
export interface CredentialCheckers {
  keys: ApiKeysService;
  sessions: ConsoleSessionsService;
  throttle: AuthThrottle;
}

/** Every `/v1` route needs a credential (none is @Public); Express matches paths in any letter case. */
const NEEDS_CREDENTIAL = /^\/v1\//i;

export function needsCredential(url: string): boolean {
  return NEEDS_CREDENTIAL.test(url);
}

/**
 * Authenticates a `/v1` request before its body is read (docs/security.md, "Request cost before
 * authentication"): a request without a valid credential is refused without its body being parsed, and
 * the answer closes the connection (the exception filter), so the unread rest is never read either.
 */
export function credentialFirst(auth: CredentialCheckers) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (!needsCredential(req.url)) return next();
    credentialOf(req, auth).then(
      () => next(),
      (e: unknown) => next(e),
    );
  };
}
