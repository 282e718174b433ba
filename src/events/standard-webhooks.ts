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
 * the base64-decoded bytes after `whsec_`. `timestamp` is unix seconds.
 */
export function signDelivery(secret: string, id: string, timestamp: number, body: string): SignedHeaders {
  const mac = createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${mac}` };
}

export function secretBytes(secret: string): Buffer {
  if (!secret.startsWith(PREFIX)) throw new Error('an events secret starts with whsec_');
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  if (key.length < 16) throw new Error('an events secret holds at least 16 bytes');
  return key;
}
