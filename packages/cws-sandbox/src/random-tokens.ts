import { createHash, randomFillSync } from 'node:crypto';

// One getrandom call per 128 tokens instead of one per token: the token endpoint is benchmarked.
const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let offset = POOL_SIZE;

/** An opaque random string of `bytes` random bytes, base64url (32 bytes → 43 characters). */
export function randomToken(bytes = 32): string {
  if (bytes > POOL_SIZE) throw new RangeError('token too long');
  if (offset + bytes > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const token = pool.toString('base64url', offset, offset + bytes);
  offset += bytes;
  return token;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
