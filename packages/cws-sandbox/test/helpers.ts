/**
 * Helpers for tests that drive a SandboxServer over HTTP the way a client application and a browser
 * would (the unit specs beside this file use them; e2e suites may too). Not used by the server.
 */
import type { SandboxServer } from '../src/sandbox-server.js';

export interface Answer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface CallInit {
  token?: string;
  json?: unknown;
  body?: RequestInit['body'];
  headers?: Record<string, string>;
}

/** One HTTP call; the body is parsed as JSON when it is JSON. Redirects are not followed. */
export async function call<T = unknown>(base: string, method: string, path: string, init: CallInit = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').startsWith('application/json') && text) parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

export function basicAuth(id: string, secret: string, keyword = 'Basic'): string {
  return `${keyword} ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/** The hidden inputs of the consent page's form, entities decoded. */
export function hiddenFields(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) fields[unescapeHtml(m[1])] = unescapeHtml(m[2]);
  return fields;
}

function unescapeHtml(value: string): string {
  return value.replace(/&(amp|lt|gt|quot|#39);/g, (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e] ?? '');
}

export interface AuthorizeParams {
  redirectUri: string;
  scope: string;
  /** Appended to the query as given (already encoded); omitted when undefined. */
  rawState?: string;
  clientId?: string;
}

export function authorizePath(sandbox: SandboxServer, p: AuthorizeParams): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: p.clientId ?? sandbox.clientId,
    redirect_uri: p.redirectUri,
    scope: p.scope,
  });
  return `/oauth/authorize?${q.toString()}${p.rawState === undefined ? '' : `&state=${p.rawState}`}`;
}

/** Opens the consent page, posts its hidden fields with the decision, returns the redirect Location. */
export async function decideConsent(
  sandbox: SandboxServer,
  p: AuthorizeParams,
  decision: 'approve' | 'deny',
  userId?: string,
): Promise<string> {
  const page = await call(sandbox.url, 'GET', authorizePath(sandbox, p));
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${page.text.slice(0, 200)}`);
  const form = new URLSearchParams(hiddenFields(page.text));
  form.set('decision', decision);
  if (userId) form.set('user', userId);
  const answer = await call(sandbox.url, 'POST', '/oauth/authorize', {
    body: form.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  const location = answer.headers.get('location');
  if (answer.status !== 302 || !location) throw new Error(`consent decision answered ${answer.status}: ${answer.text.slice(0, 200)}`);
  return location;
}

/** The authorization code of an approved consent. */
export async function authorizeCode(sandbox: SandboxServer, userId: string, p: AuthorizeParams): Promise<string> {
  const code = new URL(await decideConsent(sandbox, p, 'approve', userId)).searchParams.get('code');
  if (!code) throw new Error('no code in the redirect');
  return code;
}

export interface TokenAnswer {
  access_token: string;
  refresh_token: string;
  scope?: string[];
  expiresIn: number;
  token_type: string;
  error?: string;
  error_description?: string;
}

export function tokenRequest(
  sandbox: SandboxServer,
  body: Record<string, unknown>,
  headers?: Record<string, string>,
): Promise<Answer<TokenAnswer>> {
  return call<TokenAnswer>(sandbox.url, 'POST', '/oauth/token', { json: body, headers });
}

/** The whole authorization code flow for one user: consent page, code, exchange with body credentials. */
export async function connectUser(
  sandbox: SandboxServer,
  userId: string,
  redirectUri: string,
  scope = sandbox.scopes.join(' '),
): Promise<TokenAnswer> {
  const code = await authorizeCode(sandbox, userId, { redirectUri, scope });
  const answer = await tokenRequest(sandbox, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri,
    client_id: sandbox.clientId,
    client_secret: sandbox.clientSecret,
  });
  if (answer.status !== 200) throw new Error(`code exchange answered ${answer.status}: ${answer.text}`);
  return answer.body;
}

/** A multipart/form-data body held in memory (small tests); big uploads build a stream instead. */
export function multipartBody(
  parts: Array<{ name: string; value: string } | { name: string; fileName: string; contentType: string; data: Buffer }>,
): {
  body: Buffer;
  contentType: string;
} {
  const boundary = `----sandbox-test-${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    if ('data' in part) {
      chunks.push(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.fileName}"\r\nContent-Type: ${part.contentType}\r\n\r\n`,
        ),
        part.data,
        Buffer.from('\r\n'),
      );
    } else {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`));
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export async function waitFor<T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('waitFor timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
