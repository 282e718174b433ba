import pg from 'pg';

/** pg's own parser of timestamptz text (the one that makes a column a Date). */
const TIMESTAMPTZ = 1184;
const parseTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ) as (text: string) => Date;

/**
 * A timestamptz as PostgreSQL writes it as text (`<column>::text`: DateStyle ISO, in the session's TimeZone), read
 * as a Date and as its exact UTC text to the microsecond (`2026-11-27T18:22:37.107123Z`), the form a page's
 * cursor holds. It is the text `to_char(<column> AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')` gives,
 * without PostgreSQL formatting each row's time twice: to_char on every row of a list page was about 40 % of the
 * page's CPU in PostgreSQL, and the column itself another fifth. A time zone's offset is whole seconds, so the
 * fraction of the local text is the UTC time's.
 */
export function exactTime(text: string): { at: Date; exact: string } {
  const at = parseTimestamptz(text);
  const fraction = /\.(\d{1,6})/.exec(text)?.[1] ?? '';
  return { at, exact: `${at.toISOString().slice(0, 19)}.${fraction.padEnd(6, '0')}Z` };
}
