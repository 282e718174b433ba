import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { AppError } from './app-error.js';

/**
 * The body as text, at most `limit` bytes after decompression (413 past it, or at once when
 * Content-Length says so); gzip, deflate and br are inflated, UTF-8 is the only charset (415 otherwise),
 * as the service's JSON body parser reads them.
 */
export function readBodyText(req: IncomingMessage, contentType: string | undefined, limit: number): Promise<string> {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1].toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return Promise.reject(new AppError('unsupported_media_type', `The charset ${charset} is not supported; send UTF-8.`));
  }
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.reject(tooLarge());
  const stream = decoded(req);
  if (stream === null)
    return Promise.reject(new AppError('unsupported_media_type', 'The content-encoding is not supported (gzip, deflate, br or none).'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.removeAllListeners('data');
        stream.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => resolve((chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8')));
    stream.once('error', () =>
      reject(new AppError('validation_failed', 'The request body could not be read (aborted, or not validly compressed).')),
    );
    if (stream !== req)
      req.once('aborted', () => reject(new AppError('validation_failed', 'The request body could not be read (aborted).')));
  });
}

function decoded(req: IncomingMessage): Readable | null {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity') return req;
  if (encoding === 'gzip' || encoding === 'x-gzip') return req.pipe(createGunzip());
  if (encoding === 'deflate') return req.pipe(createInflate());
  if (encoding === 'br') return req.pipe(createBrotliDecompress());
  return null;
}

function tooLarge(): AppError {
  return new AppError('payload_too_large', 'The request body is too large.');
}
