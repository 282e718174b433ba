import { renderConsentPage, renderErrorPage } from './consent-page.js';
import { mediaTypeOf, readBody, redirect, SandboxHttpError, sendHtml } from './http-io.js';
import type { PendingAuthorization } from './pending-authorizations.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import { parseScopeList } from './scope-list.js';
import { SANDBOX_COMPANY } from './seed.js';

interface QueryParam {
  readonly raw: string;
  /** null when the percent-encoding is malformed. */
  readonly value: string | null;
}

const FORM_LIMIT_BYTES = 64 * 1024;

/** GET /oauth/authorize: validates the request (spec 4.1) and shows the login and consent page. */
export function handleAuthorizeGet(call: SandboxCall, rt: SandboxRuntime): void {
  const { config } = rt;
  const query = parseQuery(call.rawQuery);

  // RFC 6749 4.1.2.1: with a bad client or redirect URI, never redirect; tell the person instead.
  const clientId = single(query, 'client_id');
  if (clientId === undefined || clientId !== config.clientId) {
    call.record.outcome = 'invalid_client';
    return sendHtml(
      call.res,
      400,
      renderErrorPage('Unknown client', 'client_id is missing, repeated or not a registered client application.'),
    );
  }
  const redirectUri = single(query, 'redirect_uri');
  if (redirectUri === undefined || !config.redirectUris.has(redirectUri)) {
    call.record.outcome = 'invalid_redirect_uri';
    return sendHtml(
      call.res,
      400,
      renderErrorPage('Invalid redirect URI', 'redirect_uri is missing, repeated or not exactly equal to a registered redirect URI.'),
    );
  }

  const stateParams = query.get('state');
  const state = stateParams?.length === 1 ? { raw: stateParams[0].raw, value: stateParams[0].value ?? stateParams[0].raw } : null;
  const fail = (error: string, description: string) => {
    call.record.outcome = error;
    redirect(
      call.res,
      redirectUrl(
        redirectUri,
        [
          ['error', error],
          ['error_description', description],
        ],
        state?.raw,
      ),
    );
  };

  // RFC 6749 3.1: parameters must not be repeated.
  for (const [name, values] of query) {
    if (values.length > 1 && ['response_type', 'scope', 'state'].includes(name)) return fail('invalid_request', `${name} is repeated`);
  }
  const responseType = single(query, 'response_type');
  if (responseType === undefined) return fail('invalid_request', 'response_type is required');
  if (responseType !== 'code') return fail('unsupported_response_type', 'response_type must be code');
  const scopeParam = single(query, 'scope');
  if (scopeParam === undefined) return fail('invalid_request', 'scope is required');
  const scopes = parseScopeList(scopeParam, config.scopeSet);
  if (!scopes) return fail('invalid_scope', 'scope must be a space-separated subset of the registered scopes');

  const pending = rt.authorizations.add({ clientId, redirectUri, scopeParam, scopes, state });
  call.record.outcome = 'consent_page';
  sendHtml(call.res, 200, consentPage(rt, pending));
}

/** POST /oauth/authorize: the person's decision from the consent page. */
export async function handleAuthorizePost(call: SandboxCall, rt: SandboxRuntime): Promise<void> {
  if (mediaTypeOf(call.req) !== 'application/x-www-form-urlencoded') {
    call.record.outcome = 'unsupported_media_type';
    return sendHtml(call.res, 415, renderErrorPage('Bad request', 'The consent form is posted as application/x-www-form-urlencoded.'));
  }
  let form: URLSearchParams;
  try {
    form = new URLSearchParams((await readBody(call.req, FORM_LIMIT_BYTES)).toString('utf8'));
  } catch (e) {
    if (!(e instanceof SandboxHttpError)) throw e;
    call.record.outcome = e.code;
    return sendHtml(call.res, e.status, renderErrorPage('Bad request', e.description));
  }

  const pending = rt.authorizations.get(form.get('request_id') ?? '');
  if (!pending) {
    call.record.outcome = 'unknown_authorization_request';
    return sendHtml(
      call.res,
      400,
      renderErrorPage(
        'Request expired',
        'This authorization request is unknown, expired or was already answered. Start again from the application.',
      ),
    );
  }
  if (tampered(form, pending)) {
    call.record.outcome = 'tampered_authorization_request';
    return sendHtml(call.res, 400, renderErrorPage('Bad request', 'The authorization request was altered after it was shown.'));
  }

  const decision = form.get('decision');
  if (decision === 'deny') {
    rt.authorizations.take(pending.id);
    call.record.outcome = 'access_denied';
    return redirect(call.res, redirectUrl(pending.redirectUri, [['error', 'access_denied']], pending.state?.raw));
  }
  if (decision !== 'approve') {
    call.record.outcome = 'invalid_decision';
    return sendHtml(call.res, 400, renderErrorPage('Bad request', 'decision must be approve or deny.'));
  }
  const user = rt.users.get(form.get('user') ?? '');
  if (!user) {
    call.record.outcome = 'no_user_chosen';
    return sendHtml(call.res, 400, consentPage(rt, pending, 'Choose the user to log in as.'));
  }

  rt.authorizations.take(pending.id);
  const code = rt.tokens.createCode({
    userId: user.id,
    clientId: pending.clientId,
    redirectUri: pending.redirectUri,
    scopes: pending.scopes,
  });
  call.record.outcome = 'code_issued';
  redirect(call.res, redirectUrl(pending.redirectUri, [['code', code]], pending.state?.raw));
}

function consentPage(rt: SandboxRuntime, pending: PendingAuthorization, error?: string): string {
  const hidden: Array<[string, string]> = [
    ['request_id', pending.id],
    ['response_type', 'code'],
    ['client_id', pending.clientId],
    ['redirect_uri', pending.redirectUri],
    ['scope', pending.scopeParam],
  ];
  if (pending.state) hidden.push(['state', pending.state.value]);
  return renderConsentPage({
    clientName: rt.config.clientName,
    companyName: SANDBOX_COMPANY.name,
    scopes: pending.scopes,
    users: rt.users.list(),
    hidden,
    error,
  });
}

/** The copies of the request in the form are informative; if one is posted, it must match. */
function tampered(form: URLSearchParams, pending: PendingAuthorization): boolean {
  const expected: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: pending.clientId,
    redirect_uri: pending.redirectUri,
    scope: pending.scopeParam,
    state: pending.state?.value,
  };
  for (const [name, value] of Object.entries(expected)) {
    const posted = form.getAll(name);
    if (posted.length > 1 || (posted.length === 1 && posted[0] !== value)) return true;
  }
  return false;
}

/**
 * Appends parameters to a registered redirect URI that may already hold a query. The state is echoed
 * exactly as it was received (still percent-encoded), so the client gets back its own bytes.
 */
export function redirectUrl(base: string, params: ReadonlyArray<readonly [string, string]>, rawState: string | undefined): string {
  const parts = params.map(([name, value]) => `${name}=${encodeURIComponent(value)}`);
  if (rawState !== undefined) parts.push(`state=${safeQueryValue(rawState)}`);
  const query = parts.join('&');
  if (!base.includes('?')) return `${base}?${query}`;
  return base.endsWith('?') || base.endsWith('&') ? base + query : `${base}&${query}`;
}

// Characters a received query value may carry through unchanged; anything else (which a lenient parser
// let through) is percent-encoded so the Location header stays valid.
function safeQueryValue(raw: string): string {
  return raw.replace(/[^A-Za-z0-9\-._~!$'()*+,;=:@/?%]/g, (c) => encodeURIComponent(c));
}

function parseQuery(raw: string): Map<string, QueryParam[]> {
  const params = new Map<string, QueryParam[]>();
  if (raw === '') return params;
  for (const pair of raw.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq));
    if (name === null) continue;
    const rawValue = eq < 0 ? '' : pair.slice(eq + 1);
    const list = params.get(name) ?? [];
    list.push({ raw: rawValue, value: decode(rawValue) });
    params.set(name, list);
  }
  return params;
}

function decode(value: string): string | null {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/** The value of a parameter given exactly once with valid encoding; undefined otherwise. */
function single(query: Map<string, QueryParam[]>, name: string): string | undefined {
  const values = query.get(name);
  if (!values || values.length !== 1 || values[0].value === null) return undefined;
  return values[0].value;
}
