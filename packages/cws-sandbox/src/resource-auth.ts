import { sendJson } from './http-io.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import type { SandboxUser } from './user-directory.js';

export interface Principal {
  readonly user: SandboxUser;
  readonly scopes: readonly string[];
  readonly familyId: string;
}

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * Checks `Authorization: Bearer <token>` for a resource endpoint and answers 401/403 itself when it
 * fails, and 429 when the token's company has spent its limit (quota-meter.ts) (then returns null). `scope` is enforced only when it is one of the registered scopes: the spec
 * names no scopes, so a sandbox started with other scope names does not invent requirements.
 */
export function authenticate(call: SandboxCall, rt: SandboxRuntime, scope: string): Principal | null {
  const { stats } = rt.recorder;
  stats.resourceCalls++;
  const match = BEARER.exec(call.req.headers.authorization ?? '');
  if (!match) {
    call.record.outcome = 'missing_token';
    unauthorized(call, 'invalid_request', 'An Authorization: Bearer <access token> header is required', false);
    return null;
  }
  const check = rt.tokens.checkAccess(match[1]);
  if (check.status !== 'ok') {
    if (check.status === 'expired') stats.expiredTokenCalls++;
    else stats.unknownTokenCalls++; // unknown and revoked tokens alike: a correct client sends neither
    if (check.status !== 'unknown') call.record.tokenFamily = check.familyId;
    call.record.outcome = `${check.status}_token`;
    const description = {
      expired: 'The access token expired',
      revoked: 'The access token was revoked or replaced',
      unknown: 'The access token is unknown',
    }[check.status];
    unauthorized(call, 'invalid_token', description, true);
    return null;
  }
  const user = rt.users.get(check.userId);
  if (!user) {
    call.record.outcome = 'unknown_token';
    unauthorized(call, 'invalid_token', 'The access token is unknown', true);
    return null;
  }
  call.record.tokenUserId = user.id;
  call.record.tokenFamily = check.familyId;
  const waitSeconds = rt.quotas.charge(user.companyId, call.req.method);
  if (waitSeconds !== null) {
    stats.quotaRefusals++;
    call.record.outcome = 'quota_exhausted';
    sendJson(
      call.res,
      429,
      { error: 'rate_limited', error_description: "The company's limit of calls for this window is spent" },
      { 'retry-after': String(waitSeconds) },
    );
    return null;
  }
  if (rt.config.scopeSet.has(scope) && !check.scopes.includes(scope)) {
    call.record.outcome = 'insufficient_scope';
    sendJson(
      call.res,
      403,
      { error: 'insufficient_scope', error_description: `This call needs the scope ${scope}` },
      { 'www-authenticate': `Bearer realm="cws-sandbox", error="insufficient_scope", scope="${scope}"` },
    );
    return null;
  }
  return { user, scopes: check.scopes, familyId: check.familyId };
}

function unauthorized(call: SandboxCall, error: string, description: string, withError: boolean): void {
  // RFC 6750 3: a request without credentials gets the challenge without an error code.
  const challenge = withError
    ? `Bearer realm="cws-sandbox", error="${error}", error_description="${description}"`
    : 'Bearer realm="cws-sandbox"';
  sendJson(call.res, 401, { error, error_description: description }, { 'www-authenticate': challenge });
}
