import { AppError } from './app-error.js';
import { sha256 } from './hash.js';

/** Where a keyset page ends: its last row's time (PostgreSQL's exact text, microseconds) and id. */
export interface PagePosition {
  at: string;
  id: string;
}

const CURSOR_TEXT =
  /^p1\|(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\|([A-Za-z0-9_-]{16})$/;

/**
 * The `next` cursor of a keyset listing: the position and a check value over it and the listing it belongs to
 * (`scope`: the tenant and the filters), so that a cut, altered or borrowed cursor is refused. Opaque to callers;
 * not a secret.
 */
export function encodePageCursor(scope: string, p: PagePosition): string {
  return Buffer.from(`p1|${p.at}|${p.id}|${check(scope, p)}`, 'utf8').toString('base64url');
}

/** The position a cursor of `encodePageCursor` names; `validation_failed` for anything else. */
export function decodePageCursor(scope: string, cursor: string): PagePosition {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = CURSOR_TEXT.exec(text);
  const position = m ? { at: m[1], id: m[2] } : null;
  if (
    !m ||
    !position ||
    m[3] !== check(scope, position) ||
    encodePageCursor(scope, position) !== cursor ||
    Number.isNaN(Date.parse(position.at))
  ) {
    throw new AppError('validation_failed', 'after is not a cursor this service gave out for this listing.');
  }
  return position;
}

function check(scope: string, p: PagePosition): string {
  return sha256(`page|${scope}|${p.at}|${p.id}`).subarray(0, 12).toString('base64url');
}
