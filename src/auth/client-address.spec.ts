import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from '@jest/globals';
import { loadConfig } from '../config/app-config.js';
import { ConfigError } from '../config/config-error.js';
import { ClientAddress } from './client-address.js';

const base = {
  DATA_DIR: '/nonexistent-spec-dir',
  VAULT_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  OPERATOR_API_KEY: `cwsop_${randomBytes(24).toString('base64url')}`,
  DATABASE_URL: 'postgres://x@127.0.0.1/db',
};

function clients(trustProxy?: string): ClientAddress {
  return new ClientAddress(loadConfig(trustProxy === undefined ? base : { ...base, TRUST_PROXY: trustProxy }));
}

/** What proxy-addr reads of a request: the socket's address and the headers. */
function request(socket: string, forwardedFor?: string): IncomingMessage {
  return {
    socket: { remoteAddress: socket },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  } as unknown as IncomingMessage;
}

describe('ClientAddress (TRUST_PROXY)', () => {
  it('by default believes X-Forwarded-For from a proxy on this host only', () => {
    const c = clients();
    expect(c.of(request('127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    expect(c.of(request('::1', '203.0.113.9, 198.51.100.1'))).toBe('198.51.100.1');
    expect(c.of(request('::ffff:127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    expect(c.of(request('198.51.100.2', '203.0.113.9'))).toBe('198.51.100.2');
    expect(c.of(request('127.0.0.1'))).toBe('127.0.0.1');
  });

  it('with none, is always the socket', () => {
    expect(clients('none').of(request('127.0.0.1', '198.51.100.1'))).toBe('127.0.0.1');
  });

  it('with ranges, walks back past every address in them, and no further', () => {
    const c = clients('10.0.0.0/8, 192.168.1.5');
    expect(c.of(request('10.1.2.3', '203.0.113.9, 198.51.100.1, 192.168.1.5'))).toBe('198.51.100.1');
    // A caller's own header survives only left of the first untrusted address, where it is never read.
    expect(c.of(request('198.51.100.7', '10.9.9.9'))).toBe('198.51.100.7');
  });

  it('with a hop count, takes the address that many hops back', () => {
    const c = clients('2');
    expect(c.of(request('10.1.2.3', '203.0.113.9, 198.51.100.1, 172.16.0.4'))).toBe('198.51.100.1');
    expect(c.of(request('10.1.2.3'))).toBe('10.1.2.3');
  });

  it('counts an IPv6 client by its /64 and canonicalises a mapped IPv4', () => {
    const c = clients('none');
    expect(c.of(request('2001:db8:1:2::7'))).toBe('2001:db8:1:2::/64');
    expect(c.of(request('2001:db8:1:2:ffff::9'))).toBe('2001:db8:1:2::/64');
    expect(c.of(request('::ffff:198.51.100.3'))).toBe('198.51.100.3');
  });

  it('refuses a value it cannot read, naming the variable', () => {
    for (const value of ['10.0.0.0/33', 'everything', '99', 'loopback,not-an-ip']) {
      let error: unknown;
      try {
        loadConfig({ ...base, TRUST_PROXY: value });
      } catch (e) {
        error = e;
      }
      expect([value, error instanceof ConfigError && error.variable]).toEqual([value, 'TRUST_PROXY']);
    }
  });
});
