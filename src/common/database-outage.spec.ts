import { describe, expect, it } from '@jest/globals';
import { DatabaseOutage, isDatabaseUnavailable } from './database-outage.js';

const netError = (code: string, syscall = 'connect') => Object.assign(new Error(`${syscall} ${code} 127.0.0.1:5432`), { code, syscall });

describe('isDatabaseUnavailable', () => {
  it('knows the ways PostgreSQL is out of reach', () => {
    expect(isDatabaseUnavailable(netError('ECONNREFUSED'))).toBe(true);
    expect(isDatabaseUnavailable(netError('ENOTFOUND', 'getaddrinfo'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(
      true,
    );
    expect(isDatabaseUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('connection failure'), { code: '08006' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    // TypeORM's QueryFailedError keeps the driver's error beside its own.
    expect(isDatabaseUnavailable(Object.assign(new Error('query failed'), { driverError: netError('ECONNRESET', 'read') }))).toBe(true);
  });

  it('does not take a refused statement, an aborted request or an upstream failure for an outage', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))).toBe(false);
    // An upstream failure carries the socket error as its cause, which is not looked at.
    expect(isDatabaseUnavailable(Object.assign(new Error('the upstream is unavailable'), { cause: netError('ECONNREFUSED') }))).toBe(false);
    expect(isDatabaseUnavailable('ECONNREFUSED')).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
  });
});

describe('DatabaseOutage', () => {
  it('logs the beginning once, counts, and logs the end once', () => {
    const lines: string[] = [];
    const outage = new DatabaseOutage({ warn: (_o: unknown, msg?: unknown) => void lines.push(String(msg)) }, 10_000, 60_000);
    for (let i = 0; i < 50; i++) outage.report(netError('ECONNREFUSED'), 'request');
    expect(outage.active).toBe(true);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('the database is unreachable');
    outage.recovered();
    outage.recovered();
    expect(outage.active).toBe(false);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/reachable again after .* \(50 requests were answered 503 meanwhile\)/);
  });
});
