import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { signDelivery } from './standard-webhooks.js';

/** What a partner writes (docs/webhooks.md), kept independent of the signer. */
function verify(secret: string, headers: Record<string, string>, body: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`).digest();
  return headers['webhook-signature'].split(' ').some((s) => {
    const [version, mac] = s.split(',');
    const given = Buffer.from(mac ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

describe('signDelivery (Standard Webhooks)', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;

  it('signs "{id}.{timestamp}.{body}" with the decoded secret bytes', () => {
    const body = JSON.stringify({ type: 'workflow_step_updated', timestamp: '2024-01-09T00:00:00.000Z', data: { transition: 'Review' } });
    const headers = signDelivery(secret, 'evt-1', 1700000000, body);
    expect(headers['webhook-id']).toBe('evt-1');
    expect(headers['webhook-timestamp']).toBe('1700000000');
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(verify(secret, { ...headers }, body)).toBe(true);
  });

  it('a changed body, id, timestamp or secret does not verify', () => {
    const headers = { ...signDelivery(secret, 'evt-1', 1700000000, '{"a":1}') };
    expect(verify(secret, headers, '{"a":2}')).toBe(false);
    expect(verify(secret, { ...headers, 'webhook-id': 'evt-2' }, '{"a":1}')).toBe(false);
    expect(verify(secret, { ...headers, 'webhook-timestamp': '1700000001' }, '{"a":1}')).toBe(false);
    expect(verify(`whsec_${randomBytes(32).toString('base64')}`, headers, '{"a":1}')).toBe(false);
  });

  it('matches the Standard Webhooks reference vector', () => {
    // From the standard-webhooks test suite (libraries/javascript/src/index.test.ts).
    const ref = signDelivery('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(ref['webhook-signature']).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('signs with every secret of an overlap, space separated; the official verifier accepts each secret', () => {
    const next = `whsec_${randomBytes(32).toString('base64')}`;
    const body = '{"type":"connection.created","timestamp":"2026-11-23T00:00:00.000Z","data":{}}';
    const now = Math.floor(Date.now() / 1000);
    const headers = { ...signDelivery([next, secret], 'evt-9', now, body) };
    const [first, second] = headers['webhook-signature'].split(' ');
    expect(first).toBe(signDelivery(next, 'evt-9', now, body)['webhook-signature']);
    expect(second).toBe(signDelivery(secret, 'evt-9', now, body)['webhook-signature']);
    expect(new Webhook(next).verify(body, headers)).toMatchObject({ type: 'connection.created' });
    expect(new Webhook(secret).verify(body, headers)).toMatchObject({ type: 'connection.created' });
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(body, headers)).toThrow();
    expect(() => signDelivery([], 'evt-9', now, body)).toThrow();
  });

  it('refuses a secret without the whsec_ prefix', () => {
    expect(() => signDelivery('not-a-secret', 'id', 1, '')).toThrow('whsec_');
  });
});
