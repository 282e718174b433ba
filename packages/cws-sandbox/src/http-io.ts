import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** An error answered as `{"error": code, "error_description": description}` (the sandbox's own shape). */
export class SandboxHttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly description: string,
    readonly headers: OutgoingHttpHeaders = {},
  ) {
    super(description);
    this.name = 'SandboxHttpError';
  }
}

export function badRequest(code: string, description: string): SandboxHttpError {
  return new SandboxHttpError(400, code, description);
}

export const JSON_LIMIT_BYTES = 1024 * 1024;

export function sendRawJson(res: ServerResponse, status: number, text: string, headers?: OutgoingHttpHeaders): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: OutgoingHttpHeaders): void {
  sendRawJson(res, status, JSON.stringify(body), headers);
}

export function sendError(res: ServerResponse, error: SandboxHttpError): void {
  sendJson(res, error.status, { error: error.code, error_description: error.description }, error.headers);
}

export function sendHtml(res: ServerResponse, status: number, html: string): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
    'cache-control': 'no-store',
    // The consent page must not be framed by another site (clickjacking of the Approve button). No
    // form-action: browsers apply it to the redirect that follows the post, which leaves this origin.
    'x-frame-options': 'DENY',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  });
  res.end(html);
}

export function redirect(res: ServerResponse, location: string): void {
  res.writeHead(302, { location, 'cache-control': 'no-store', 'content-length': 0 });
  res.end();
}

/** The media type of the request body, lower-cased, without parameters; null without a content-type. */
export function mediaTypeOf(req: IncomingMessage): string | null {
  const header = req.headers['content-type'];
  if (!header) return null;
  const semi = header.indexOf(';');
  return (semi < 0 ? header : header.slice(0, semi)).trim().toLowerCase();
}

export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export type BodyFormat = 'json' | 'form' | 'multipart' | 'other' | 'none';

export function bodyFormatOf(mediaType: string | null, withBody: boolean): BodyFormat {
  switch (mediaType) {
    case 'application/json':
      return 'json';
    case 'application/x-www-form-urlencoded':
      return 'form';
    case 'multipart/form-data':
      return 'multipart';
    case null:
      return withBody ? 'other' : 'none';
    default:
      return 'other';
  }
}

/** Reads the whole body; only for small bodies (JSON, forms), never for uploads. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => {
      if (tooLarge) reject(new SandboxHttpError(413, 'payload_too_large', `The body exceeds ${limit} bytes`));
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    });
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('request aborted'));
    });
  });
}

/**
 * Reads a JSON body. A missing body gives `undefined`; a non-JSON media type, bad JSON or an oversized
 * body throw a SandboxHttpError whose code is `errorCode` (OAuth endpoints use `invalid_request`).
 */
export async function readJson(req: IncomingMessage, errorCode = 'invalid_json', limit = JSON_LIMIT_BYTES): Promise<unknown> {
  const type = mediaTypeOf(req);
  if (type !== 'application/json') {
    if (!hasBody(req) && type === null) return undefined;
    throw new SandboxHttpError(415, 'unsupported_media_type', 'The body must be JSON (content-type: application/json)');
  }
  let raw: Buffer;
  try {
    raw = await readBody(req, limit);
  } catch (e) {
    if (e instanceof SandboxHttpError) throw new SandboxHttpError(e.status, errorCode, e.description);
    throw e;
  }
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new SandboxHttpError(400, errorCode, 'The body is not valid JSON');
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

export function parseHttpUrl(value: string): URL | null {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}
