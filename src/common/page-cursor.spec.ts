import { describe, expect, it } from '@jest/globals';
import { AppError } from './app-error.js';
import { cursorOf, EXACT_TIME, KeysetCursor, pageOf, textOfCursor, UUID_TEXT } from './page-cursor.js';

const cursor = new KeysetCursor<{ at: string; id: string }>('t1', { at: EXACT_TIME, id: UUID_TEXT });
const position = { at: '2026-11-23T12:00:00.123456Z', id: '3f1c2b4a-0d5e-4c6f-8a7b-9c0d1e2f3a4b' };

function codeOf(work: () => unknown): string {
  try {
    work();
    return 'accepted';
  } catch (e) {
    return e instanceof AppError ? e.code : 'other error';
  }
}

describe('cursor text', () => {
  it('reads back only the exact spelling it writes', () => {
    const written = cursorOf('x42.7');
    expect(textOfCursor(written, 64)).toBe('x42.7');
    // Base64url's last character carries spare bits: another character there decodes to the same bytes.
    const respelled = written.slice(0, -1) + String.fromCharCode(written.charCodeAt(written.length - 1) + 1);
    expect(Buffer.from(respelled, 'base64url').toString('utf8')).toBe('x42.7');
    expect(textOfCursor(respelled, 64)).toBeNull();
    for (const bad of ['', '!!!', `${written}=`, cursorOf('x'.repeat(60))]) expect(textOfCursor(bad, 64)).toBeNull();
  });
});

describe('keyset cursors', () => {
  it('round-trip a position for their listing, microseconds included', () => {
    const c = cursor.encode('acme', position);
    expect(c).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor.decode('acme', c)).toEqual(position);
  });

  it('refuse a cursor of another listing, an altered one, a date that is none, and garbage', () => {
    const c = cursor.encode('acme', position);
    const text = Buffer.from(c, 'base64url').toString('utf8');
    const altered = [text.replace('123456', '123457'), text.replace('3f1c', '3f1d'), text.replace('t1|', 't2|'), `${text}x`];
    expect(codeOf(() => cursor.decode('beta', c))).toBe('validation_failed');
    for (const t of altered) expect(codeOf(() => cursor.decode('acme', cursorOf(t)))).toBe('validation_failed');
    const notADate = cursor.encode('acme', { ...position, at: '2026-13-45T12:00:00.123456Z' });
    expect(codeOf(() => cursor.decode('acme', notADate))).toBe('validation_failed');
    for (const g of ['', 'abc', '!!!', c.slice(1), `${c}A`]) expect(codeOf(() => cursor.decode('acme', g))).toBe('validation_failed');
  });
});

describe('pageOf', () => {
  it('answers the first limit rows, and a cursor after the last of them only when the read found more', () => {
    expect(pageOf([1, 2, 3], 2, (last) => `after ${last}`)).toEqual({ items: [1, 2], next: 'after 2' });
    expect(pageOf([1, 2], 2, (last) => `after ${last}`)).toEqual({ items: [1, 2], next: null });
    expect(pageOf([], 2, (last) => `after ${String(last)}`)).toEqual({ items: [], next: null });
  });
});
