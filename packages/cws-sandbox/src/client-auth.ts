import { createHash, timingSafeEqual } from 'node:crypto';
import type { SandboxConfig } from './types.js';

export type ClientAuthResult =
  | { readonly ok: true; readonly via: 'body' | 'basic-header' }
  | { readonly ok: false; readonly via: 'body' | 'basic-header' | null; readonly description: string };

/**
 * Client authentication at the token endpoint (spec 4.1): client_id + client_secret in the body, or
 * `Authorization: Basic base64(id:secret)`; the spec prints the keyword as `Base`, so both are accepted.
 * Exactly one of the two places must be used.
 */
export class ClientAuthenticator {
  private readonly secretDigest: Buffer;

  constructor(private readonly config: SandboxConfig) {
    this.secretDigest = digest(config.clientSecret);
  }

  authenticate(authorization: string | undefined, body: Record<string, unknown>): ClientAuthResult {
    const inBody = body.client_id !== undefined || body.client_secret !== undefined;
    if (authorization !== undefined) {
      if (inBody)
        return { ok: false, via: null, description: 'Client credentials were sent both in the Authorization header and in the body' };
      const credentials = parseBasic(authorization);
      if (!credentials)
        return { ok: false, via: 'basic-header', description: 'The Authorization header is not Basic base64(client_id:client_secret)' };
      return this.check(credentials.id, credentials.secret, 'basic-header');
    }
    if (!inBody) return { ok: false, via: null, description: 'Client credentials are missing' };
    const { client_id: id, client_secret: secret } = body;
    if (typeof id !== 'string' || typeof secret !== 'string') {
      return { ok: false, via: 'body', description: 'client_id and client_secret must both be strings' };
    }
    return this.check(id, secret, 'body');
  }

  private check(id: string, secret: string, via: 'body' | 'basic-header'): ClientAuthResult {
    // Digests have equal lengths, so timingSafeEqual can compare secrets of any length in constant time.
    const secretOk = timingSafeEqual(digest(secret), this.secretDigest);
    if (id !== this.config.clientId || !secretOk) return { ok: false, via, description: 'Unknown client or wrong client secret' };
    return { ok: true, via };
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function parseBasic(header: string): { id: string; secret: string } | null {
  const space = header.indexOf(' ');
  if (space < 0) return null;
  const scheme = header.slice(0, space).toLowerCase();
  if (scheme !== 'basic' && scheme !== 'base') return null;
  const encoded = header.slice(space + 1).trim();
  if (!BASE64.test(encoded) || encoded.length % 4 !== 0) return null;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}
