import { AppError } from '../common/app-error.js';

/** Failures talking to the upstream, told apart by what the caller should do about them. */
export class UpstreamUnavailableError extends Error {
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'UpstreamUnavailableError';
  }
}

export class UpstreamTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamTimeoutError';
  }
}

/**
 * The token endpoint answered with an error. `error` is the OAuth error code when the body names one
 * (the spec shows no error format; RFC 6749 5.2 is assumed), else null. `retryAfterSeconds` from 429/503.
 */
export class TokenEndpointError extends Error {
  constructor(
    readonly status: number,
    readonly error: string | null,
    readonly retryAfterSeconds: number | null,
  ) {
    super(`the token endpoint answered ${status}${error ? ` (${error})` : ''}`);
    this.name = 'TokenEndpointError';
  }

  /** The refresh token (or code) is dead: only a new authorization helps. */
  get isInvalidGrant(): boolean {
    return this.error === 'invalid_grant';
  }

  /** Worth retrying later with the same grant. */
  get isTransient(): boolean {
    return this.status === 429 || this.status >= 500;
  }
}

/** A resource call answered with a status the caller treats as failure (e.g. userinfo). */
export class UpstreamStatusError extends Error {
  constructor(
    readonly status: number,
    readonly path: string,
  ) {
    super(`the upstream answered ${status} on ${path}`);
    this.name = 'UpstreamStatusError';
  }
}

/**
 * The one mapping of an upstream failure to the contract's error: too slow (upstream_timeout), unreachable or
 * throttled (upstream_unavailable), or refused (upstream_error). `what` names the endpoint in the message. Null
 * for an error that is not an upstream failure.
 */
export function upstreamFailure(e: unknown, what = 'The upstream service'): AppError | null {
  if (e instanceof UpstreamTimeoutError) return new AppError('upstream_timeout', `${what} did not answer in time.`);
  if (e instanceof UpstreamUnavailableError) return new AppError('upstream_unavailable', `${what} could not be reached.`);
  if (e instanceof TokenEndpointError && e.isTransient)
    return new AppError('upstream_unavailable', `${what} is unavailable (${e.status}).`);
  if (e instanceof TokenEndpointError || e instanceof UpstreamStatusError)
    return new AppError('upstream_error', `${what} refused the call (${e.status}).`);
  return null;
}
