import { variable } from './variable.js';
import { int, num, onOff, parsedBy, VariableProblem } from './variable-types.js';

// Synced records (docs/records.md): whether tenants sync their users' workflows, how often, within what share of the
// company's read budget, and how long removed records and the change feed are kept.

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 };

/** A duration as `<n>s`, `<n>m` or `<n>h` (or plain milliseconds), 1 s to 24 h. */
export function durationMs(raw: string): number {
  const match = /^(\d{1,9})(ms|s|m|h)?$/.exec(raw);
  const ms = match ? Number(match[1]) * (match[2] === undefined || match[2] === 'ms' ? 1 : UNIT_MS[match[2]]) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1000 || ms > 86_400_000)
    throw new VariableProblem('must be a duration from 1s to 24h, such as `15m`, `90s` or `1h`');
  return ms;
}

/** Read at every start. */
export const SYNC_VARIABLES = {
  SYNC_WORKFLOWS: variable(
    'synced records',
    onOff(),
    false,
    "`on`/`off`: keep a copy of each connected user's workflows, for every tenant unless the tenant says otherwise (see `docs/records.md`)",
  ),
  SYNC_POLL_INTERVAL: variable(
    'synced records',
    parsedBy(durationMs),
    15 * 60_000,
    "how often each synced user's whole list is read again (`15m`, `90s`, `1h`); stretched when the budget share is short",
    { defaultText: '`15m`' },
  ),
  SYNC_BUDGET_SHARE: variable(
    'synced records',
    num(0.01, 1),
    0.25,
    "the most of a company's `read` budget (see `docs/quotas.md`) sync may spend, 0.01 to 1",
  ),
  SYNC_TOMBSTONE_DAYS: variable(
    'synced records',
    int(1, 400),
    30,
    'days a removed record is still listed as `deleted` and the change feed is kept (an older cursor is `410 cursor_expired`)',
  ),
} as const;
