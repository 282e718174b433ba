import { AppError } from './app-error.js';
import { sha256 } from './hash.js';

/*
 * Page cursors, the `next` a list answers and the `after` it is given back. A cursor is the base64url of a
 * position's text, and one given back is read only when it is exactly what this service writes for that text (no
 * other spelling of the same bytes), so that a position has one cursor.
 */

/** The cursor of a position's text. */
export function cursorOf(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** The text of a cursor that `cursorOf` wrote; null for anything else, or one longer than `maxLength`. */
export function textOfCursor(cursor: string, maxLength: number): string | null {
  if (cursor.length === 0 || cursor.length > maxLength || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  return cursorOf(text) === cursor ? text : null;
}

/** How a field of a position is written in a cursor: a pattern without anchors or capturing groups, and any check beyond it. */
export interface CursorField {
  readonly pattern: RegExp;
  readonly valid?: (text: string) => boolean;
}

/** A timestamptz as PostgreSQL's exact UTC text, microseconds included (`YYYY-MM-DD"T"HH24:MI:SS.US"Z"`). */
export const EXACT_TIME: CursorField = {
  pattern: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z/,
  valid: (text) => !Number.isNaN(Date.parse(text)),
};

export const UUID_TEXT: CursorField = { pattern: /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/ };

const MAX_KEYSET_CURSOR = 200;
const CHECK = /[A-Za-z0-9_-]{16}/;

/**
 * The cursor of a keyset list: `<version>|<field>|…|<check>`, the position of a page's last row followed by a check
 * value over it and the listing it belongs to (a tenant's connections, one tenant's audit rows, every audit row).
 * A cursor that was cut, altered or taken from another listing fails the check and is `validation_failed`. The
 * check is signed with no secret, on purpose: forging one only starts the caller's own listing somewhere else,
 * and a cursor given out by one instance or release reads the same on any other.
 */
export class KeysetCursor<P extends { [K in keyof P]: string }> {
  private readonly names: ReadonlyArray<keyof P & string>;
  private readonly text: RegExp;

  /** `fields` in the order they are written; `version` names the format (a cursor of another format is refused). */
  constructor(
    private readonly version: string,
    private readonly fields: { readonly [K in keyof P]: CursorField },
  ) {
    this.names = Object.keys(fields) as Array<keyof P & string>;
    const groups = this.names.map((name) => `(${fields[name].pattern.source})`);
    this.text = new RegExp(`^${version}\\|${groups.join('\\|')}\\|(${CHECK.source})$`);
  }

  /** The cursor of the position `p` in `listing`. */
  encode(listing: string, p: P): string {
    const values = this.names.map((name) => p[name]);
    return cursorOf([this.version, ...values, sign(listing, values)].join('|'));
  }

  /** The position a cursor of `listing` names; `validation_failed` for any other text. */
  decode(listing: string, cursor: string): P {
    const match = this.text.exec(textOfCursor(cursor, MAX_KEYSET_CURSOR) ?? '');
    const values = match ? match.slice(1, -1) : [];
    const fieldsValid = values.every((value, i) => this.fields[this.names[i]].valid?.(value) ?? true);
    if (!match || match.at(-1) !== sign(listing, values) || !fieldsValid)
      throw new AppError('validation_failed', 'after is not a cursor this service gave out for this listing.');
    return Object.fromEntries(this.names.map((name, i) => [name, values[i]])) as P;
  }
}

function sign(listing: string, values: readonly string[]): string {
  return sha256([listing, ...values].join('|'))
    .subarray(0, 12)
    .toString('base64url');
}

/**
 * A page from a keyset read of up to `limit + 1` rows: the first `limit`, and the cursor after the last of them
 * when the read found more (null on the last page).
 */
export function pageOf<T>(rows: readonly T[], limit: number, cursorAfter: (last: T) => string): { items: T[]; next: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, next: rows.length > limit && last !== undefined ? cursorAfter(last) : null };
}
