import { TokenEndpointError, UpstreamStatusError } from './upstream.errors.js';
import { AppError } from '../common/app-error.js';
import type { ResourceResponse, TokenSet, UpstreamUser } from './upstream.types.js';

// The CWS's answers read: a token set (spec 4.1), a user (/userinfo), an OAuth error, a Retry-After.

export function parseTokenSet(text: string, withScope: boolean): TokenSet {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new TokenEndpointError(200, 'invalid_token_response', null);
  }
  const accessToken = json.access_token;
  const refreshToken = json.refresh_token;
  // The spec names the field expiresIn; expires_in (RFC 6749) is accepted as the same thing. Never a constant.
  const expiresIn = json.expiresIn ?? json.expires_in;
  if (typeof accessToken !== 'string' || !accessToken || typeof refreshToken !== 'string' || !refreshToken) {
    throw new TokenEndpointError(200, 'invalid_token_response', null);
  }
  if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new TokenEndpointError(200, 'invalid_token_response', null);
  }
  return {
    accessToken,
    refreshToken,
    expiresIn,
    scope: withScope || json.scope !== undefined ? scopesOf(json.scope) : null,
    tokenType: typeof json.token_type === 'string' ? json.token_type : 'Bearer',
  };
}

export function parseUser(text: string): UpstreamUser {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new UpstreamStatusError(200, '/userinfo');
  }
  const id = json.id ?? json.sub ?? json.user_id ?? json.userId;
  if ((typeof id !== 'string' && typeof id !== 'number') || id === '') throw new UpstreamStatusError(200, '/userinfo');
  const str = (v: unknown) => (typeof v === 'string' && v ? v : null);
  return {
    id: String(id),
    email: str(json.email),
    username: str(json.username) ?? str(json.preferred_username),
    scopes: json.scopes !== undefined || json.scope !== undefined ? scopesOf(json.scopes ?? json.scope) : null,
  };
}

function scopesOf(v: unknown): string[] | null {
  if (Array.isArray(v)) return v.filter((s): s is string => typeof s === 'string');
  if (typeof v === 'string') return v.split(/\s+/).filter(Boolean);
  return null;
}

export function oauthErrorOf(text: string): string | null {
  try {
    const json = JSON.parse(text) as { error?: unknown };
    return typeof json.error === 'string' ? json.error : null;
  } catch {
    return null;
  }
}

export function retryAfterOf(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return null;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(v);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** A resource answer read whole (a webhook's, an agent's tool call): its status, media type and body, JSON parsed when it is JSON. */
export interface ReadAnswer {
  status: number;
  contentType: string | null;
  body: unknown;
  /** The body as the upstream sent it (UTF-8). */
  text: string;
}

/** Reads a resource answer into memory, at most `maxBytes` (past it: `upstream_error`, the rest dropped). */
export async function readAnswer(res: ResourceResponse, maxBytes: number): Promise<ReadAnswer> {
  const length = Number(res.headers['content-length'] ?? Number.NaN);
  let text: string;
  if (length > maxBytes) {
    res.body.destroy();
    throw new AppError('upstream_error', 'The upstream answer was too large.');
  }
  if (length >= 0) {
    // The length is known and within the bound: one read, no chunk list.
    text = await res.body.text();
  } else {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (size > maxBytes) {
        res.body.destroy();
        throw new AppError('upstream_error', 'The upstream answer was too large.');
      }
      chunks.push(buf);
    }
    text = Buffer.concat(chunks).toString('utf8');
  }
  const raw = res.headers['content-type'];
  const contentType = Array.isArray(raw) ? (raw[0] ?? null) : (raw ?? null);
  let body: unknown = text;
  if (text && (contentType?.includes('json') ?? true)) {
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      body = text;
    }
  }
  return { status: res.status, contentType, body, text };
}
