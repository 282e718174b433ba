import { AppError } from '../common/app-error.js';
import { cursorOf, textOfCursor } from '../common/page-cursor.js';

/**
 * A position in a tenant's change feed: the writer's transaction id, its seq, and when the position was given out
 * (ms; the cursor's age, for `410 cursor_expired`).
 */
export interface ChangePosition {
  /** xid8 as decimal text. */
  writerXid: string;
  seq: number;
  at: number;
}

/** The feed's start. */
export const FEED_START: Omit<ChangePosition, 'at'> = { writerXid: '0', seq: 0 };

/** The cursor of a position: base64url of `c<writer xid>.<seq>.<ms>`. Opaque to callers. */
export function encodeChangeCursor(p: ChangePosition): string {
  return cursorOf(`c${p.writerXid}.${p.seq}.${p.at}`);
}

/** The position a cursor names; `validation_failed` for anything this service did not write. */
export function decodeChangeCursor(cursor: string, name = 'cursor'): ChangePosition {
  const text = textOfCursor(cursor, 80);
  const match = /^c(\d{1,20})\.(\d{1,18})\.(\d{1,15})$/.exec(text ?? '');
  const refused = new AppError('validation_failed', `${name} is not a cursor this service gave out.`);
  if (!match) throw refused;
  const xid = BigInt(match[1]);
  const p = { writerXid: xid.toString(), seq: Number(match[2]), at: Number(match[3]) };
  if (xid >= 2n ** 64n || !Number.isSafeInteger(p.seq) || encodeChangeCursor(p) !== cursor) throw refused;
  return p;
}

/** Whether `a` is after `b` in feed order. */
export function isAfter(a: Omit<ChangePosition, 'at'>, b: Omit<ChangePosition, 'at'>): boolean {
  const ax = BigInt(a.writerXid);
  const bx = BigInt(b.writerXid);
  return ax > bx || (ax === bx && a.seq > b.seq);
}
