import { hash } from 'node:crypto';

/**
 * SHA-256 of a string (UTF-8) or bytes: how keys, states and secrets are stored and compared without keeping
 * them. One-shot (no Hash object per call): every facade call hashes its key.
 */
export function sha256(data: string | Buffer): Buffer {
  return hash('sha256', data, 'buffer');
}
