import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/app-error.js';
import { CONNECTION_CURSOR } from './connections.service.js';

const position = { createdAt: '2026-11-23T12:00:00.123456Z', id: '3f1c2b4a-0d5e-4c6f-8a7b-9c0d1e2f3a4b' };

function codeOf(work: () => unknown): string {
  try {
    work();
    return 'accepted';
  } catch (e) {
    return e instanceof AppError ? e.code : 'other error';
  }
}

describe('connection cursors', () => {
  it('round-trips a position for its tenant, microseconds included', () => {
    const cursor = CONNECTION_CURSOR.encode('acme', position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(CONNECTION_CURSOR.decode('acme', cursor)).toEqual(position);
  });

  it('refuses a cursor of another tenant, an altered one and garbage', () => {
    const cursor = CONNECTION_CURSOR.encode('acme', position);
    const text = Buffer.from(cursor, 'base64url').toString('utf8');
    const altered = [text.replace('123456', '123457'), text.replace('3f1c', '3f1d'), text.replace('c1|', 'c2|'), `${text}x`];
    expect(codeOf(() => CONNECTION_CURSOR.decode('beta', cursor))).toBe('validation_failed');
    for (const t of altered)
      expect(codeOf(() => CONNECTION_CURSOR.decode('acme', Buffer.from(t).toString('base64url')))).toBe('validation_failed');
    for (const g of ['', 'abc', '!!!', cursor.slice(1), `${cursor}A`])
      expect(codeOf(() => CONNECTION_CURSOR.decode('acme', g))).toBe('validation_failed');
  });
});
