import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/app-error.js';
import { decodeChangeCursor, encodeChangeCursor, isAfter } from './change-cursor.js';
import { nextPagePath, nextTarget, OffOrigin } from './link-header.js';
import { canonicalJson, newer, upstreamObject } from './upstream-object.js';
import { workflowIdOfEvent } from './sync-engine.service.js';

describe('change cursors', () => {
  it('round-trips a position and refuses any other text', () => {
    const p = { writerXid: '18446744073709551615', seq: 42, at: 1_700_000_000_000 };
    expect(decodeChangeCursor(encodeChangeCursor(p))).toEqual(p);
    for (const bad of [
      '',
      'x',
      encodeChangeCursor(p) + 'A',
      Buffer.from('c01.1.1').toString('base64url'),
      Buffer.from('c18446744073709551616.1.1').toString('base64url'),
    ]) {
      expect(() => decodeChangeCursor(bad)).toThrow(AppError);
    }
  });

  it('orders by writer, then seq', () => {
    expect(isAfter({ writerXid: '10', seq: 1 }, { writerXid: '9', seq: 5 })).toBe(true);
    expect(isAfter({ writerXid: '10', seq: 1 }, { writerXid: '10', seq: 1 })).toBe(false);
    expect(isAfter({ writerXid: '10', seq: 2 }, { writerXid: '10', seq: 1 })).toBe(true);
  });
});

describe('Link rel="next"', () => {
  it('finds the next target among several links', () => {
    expect(nextTarget('<https://a/x?p=1>; rel="prev", <https://a/x?p=3>; rel="next"')).toBe('https://a/x?p=3');
    expect(nextTarget('</w?p=2>; rel=next')).toBe('/w?p=2');
    expect(nextTarget('</w?p=2>; rel="last"')).toBeNull();
    expect(nextTarget(undefined)).toBeNull();
  });

  it('follows only within the API URL (origin and path prefix)', () => {
    const api = 'https://api.example/v2';
    expect(nextPagePath('<https://api.example/v2/workflows?page=2>; rel="next"', '/workflows', api)).toBe('/workflows?page=2');
    expect(nextPagePath('<?page=3>; rel="next"', '/workflows?page=2', api)).toBe('/workflows?page=3');
    expect(nextPagePath(undefined, '/workflows', api)).toBeNull();
    for (const target of [
      'https://evil.example/v2/workflows',
      'http://api.example/v2/workflows',
      'https://api.example/other/workflows',
      '/v1/workflows',
      'https://u:p@api.example/v2/workflows',
    ]) {
      expect(() => nextPagePath(`<${target}>; rel="next"`, '/workflows', api)).toThrow(OffOrigin);
    }
  });
});

describe('upstream objects', () => {
  it('reads id, version and lastModified; the digest ignores key order', () => {
    const a = upstreamObject({ id: 'wf1', versionNumber: 3, lastModified: '2026-01-01T00:00:00Z', x: { b: 1, a: 2 } }, 'id');
    const b = upstreamObject({ x: { a: 2, b: 1 }, lastModified: '2026-01-01T00:00:00Z', versionNumber: 3, id: 'wf1' }, 'id');
    expect(a?.digest).toBe(b?.digest);
    expect(a).toMatchObject({ id: 'wf1', version: 3 });
    expect(upstreamObject({ name: 'no id' }, 'id')).toBeNull();
    expect(upstreamObject([1], 'id')).toBeNull();
    expect(canonicalJson({ b: [{ d: 1, c: 2 }], a: null })).toBe('{"a":null,"b":[{"c":2,"d":1}]}');
  });

  it('never takes an older object: versionNumber, then lastModified', () => {
    const at = (v: number | null, t: string | null) => ({ version: v, lastModified: t === null ? null : new Date(t) });
    expect(newer(at(2, '2026-01-01T00:00:00Z'), at(3, '2025-01-01T00:00:00Z'))).toBe(false);
    expect(newer(at(3, '2025-01-01T00:00:00Z'), at(2, '2026-01-01T00:00:00Z'))).toBe(true);
    expect(newer(at(3, '2026-01-02T00:00:00Z'), at(3, '2026-01-01T00:00:00Z'))).toBe(true);
    expect(newer(at(3, '2025-12-31T00:00:00Z'), at(3, '2026-01-01T00:00:00Z'))).toBe(false);
    expect(newer(at(null, null), at(3, '2026-01-01T00:00:00Z'))).toBe(true);
  });

  it('reads the workflow an event names from workflowId or workflow.id, nothing else', () => {
    expect(workflowIdOfEvent({ workflowId: 'wf1' })).toBe('wf1');
    expect(workflowIdOfEvent({ workflow: { id: 'wf2' } })).toBe('wf2');
    expect(workflowIdOfEvent({ id: 'dlv_1' })).toBeNull();
    expect(workflowIdOfEvent(['wf'])).toBeNull();
  });
});
