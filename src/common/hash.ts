import { createHash } from 'node:crypto';

/** SHA-256 of a string (UTF-8) or bytes: how keys, states and secrets are stored and compared without keeping them. */
export function sha256(data: string | Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}
