import { createHmac } from 'node:crypto';

/** The headers of one signed delivery (https://www.standardwebhooks.com/). */
export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

const PREFIX = 'whsec_';

/**
 * Signs `body` as Standard Webhooks: `v1,<base64 HMAC-SHA256 over "{id}.{timestamp}.{body}">`, keyed with
 * the base64-decoded bytes after `whsec_`. `timestamp` is unix seconds. Several secrets (a rotation's
 * overlap) give several signatures, space separated, in the order given: a verifier accepts any one.
 */
export function signDelivery(secrets: string | readonly string[], id: string, timestamp: number, body: string): SignedHeaders {
  const signatures = (typeof secrets === 'string' ? [secrets] : secrets).map(
    (secret) => `v1,${createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`,
  );
  if (signatures.length === 0) throw new Error('a delivery is signed with at least one secret');
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}

export function secretBytes(secret: string): Buffer {
  if (!secret.startsWith(PREFIX)) throw new Error('an events secret starts with whsec_');
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  if (key.length < 16) throw new Error('an events secret holds at least 16 bytes');
  return key;
}
