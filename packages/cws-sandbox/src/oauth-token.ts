import { ClientAuthenticator } from './client-auth.js';
import { hasBody, isPlainObject, readJson, SandboxHttpError, sendError, sendJson } from './http-io.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import { parseScopeList } from './scope-list.js';
import type { GrantResult, GrantTokens } from './token-store.js';

const TOKEN_BODY_LIMIT = 64 * 1024;
// RFC 6749 5.1: token responses must not be cached.
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

/** POST /oauth/token (spec 4.1, 2.2); errors in the RFC 6749 5.2 shape (the sandbox's own choice). */
export class TokenEndpoint {
  private readonly clients: ClientAuthenticator;

  constructor(private readonly rt: SandboxRuntime) {
    this.clients = new ClientAuthenticator(rt.config);
  }

  async handle(call: SandboxCall): Promise<void> {
    this.rt.recorder.stats.tokenRequests++;
    try {
      await this.exchange(call);
    } catch (e) {
      if (!(e instanceof SandboxHttpError)) throw e;
      call.record.outcome ??= e.code;
      sendError(call.res, e);
    }
  }

  private async exchange(call: SandboxCall): Promise<void> {
    // Deliberately strict: the spec describes the body as JSON, so a form-encoded body is refused.
    if (call.mediaType !== 'application/json') {
      call.record.outcome = call.mediaType === 'application/x-www-form-urlencoded' ? 'form_body_refused' : 'invalid_request';
      throw oauthError(400, 'invalid_request', 'The token request body must be JSON (content-type: application/json)');
    }
    if (!hasBody(call.req)) throw oauthError(400, 'invalid_request', 'The token request has no body');
    const body = await readJson(call.req, 'invalid_request', TOKEN_BODY_LIMIT);
    if (!isPlainObject(body)) throw oauthError(400, 'invalid_request', 'The token request body must be a JSON object');

    const auth = this.clients.authenticate(call.req.headers.authorization, body);
    call.record.clientAuth = auth.via;
    if (!auth.ok) throw oauthError(401, 'invalid_client', auth.description, { 'www-authenticate': 'Basic realm="cws-sandbox"' });

    const grantType = stringParam(body, 'grant_type');
    if (grantType === undefined) throw oauthError(400, 'invalid_request', 'grant_type is required');
    call.record.grantType = grantType;
    if (grantType === 'authorization_code') return this.codeGrant(call, body);
    if (grantType === 'refresh_token') return this.refreshGrant(call, body);
    throw oauthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  }

  private codeGrant(call: SandboxCall, body: Record<string, unknown>): void {
    const { rt } = this;
    const code = stringParam(body, 'code');
    if (code === undefined) throw oauthError(400, 'invalid_request', 'code is required');
    const redirectUri = stringParam(body, 'redirect_uri');
    if (redirectUri === undefined) throw oauthError(400, 'invalid_request', 'redirect_uri is required');
    if (!rt.config.redirectUris.has(redirectUri)) {
      call.record.outcome = 'unregistered_redirect_uri';
      throw oauthError(400, 'invalid_grant', 'redirect_uri is not a registered redirect URI');
    }
    const tokens = granted(call, rt.tokens.exchangeCode(code, rt.config.clientId, redirectUri));
    rt.recorder.stats.codeExchanges++;
    sendJson(
      call.res,
      200,
      {
        access_token: tokens.accessToken,
        refresh_token: tokens.refreshToken,
        scope: tokens.scopes,
        expiresIn: rt.config.accessTokenTtlSeconds,
        token_type: 'Bearer',
      },
      NO_STORE,
    );
  }

  private refreshGrant(call: SandboxCall, body: Record<string, unknown>): void {
    const { rt } = this;
    const refreshToken = stringParam(body, 'refresh_token');
    if (refreshToken === undefined) throw oauthError(400, 'invalid_request', 'refresh_token is required');
    let scopes: string[] | undefined;
    const scopeParam = stringParam(body, 'scope');
    if (scopeParam !== undefined) {
      const parsed = parseScopeList(scopeParam, rt.config.scopeSet);
      if (!parsed) {
        call.record.outcome = 'invalid_scope';
        throw oauthError(400, 'invalid_scope', 'scope must be a space-separated subset of the registered and previously granted scopes');
      }
      scopes = parsed;
    }
    const result = rt.tokens.refresh(refreshToken, scopes);
    if (!result.ok && result.outcome === 'refresh_reuse') rt.recorder.stats.refreshReuses++;
    const tokens = granted(call, result);
    rt.recorder.stats.refreshes++;
    // Spec 2.2: the refresh response carries the two new tokens, the type and the lifetime (no scope).
    sendJson(
      call.res,
      200,
      {
        access_token: tokens.accessToken,
        refresh_token: tokens.refreshToken,
        token_type: 'Bearer',
        expiresIn: rt.config.accessTokenTtlSeconds,
      },
      NO_STORE,
    );
  }
}

/** The tokens of a grant, its outcome on the call's record; a refused grant is the OAuth error it names. */
function granted(call: SandboxCall, result: GrantResult): GrantTokens {
  if (!result.ok) {
    call.record.outcome = result.outcome;
    if (result.familyId) call.record.tokenFamily = result.familyId;
    throw oauthError(400, result.error, result.description);
  }
  call.record.tokenFamily = result.tokens.familyId;
  call.record.outcome = 'ok';
  return result.tokens;
}

function oauthError(status: number, code: string, description: string, headers: Record<string, string> = {}): SandboxHttpError {
  return new SandboxHttpError(status, code, description, { ...NO_STORE, ...headers });
}

/** A parameter that must be a string when present (undefined when absent). */
function stringParam(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw oauthError(400, 'invalid_request', `${name} must be a string`);
  return value;
}
