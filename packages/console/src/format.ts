/** Times in UTC, to the second: the same on every operator's screen and in the logs. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function ms(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : `${n.toLocaleString('en-US')} ms`;
}

/** A duration in the largest unit that keeps it short: 45 s, 12 min, 5 h, 3 d. */
export function age(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86_400)} d`;
}

/** What an error code means for the operator (the codes of the connections' last error and renewals). */
const EXPLAINED: Record<string, string> = {
  refresh_token_rejected: 'The upstream refused the refresh token: the user must connect again.',
  reauth_required: 'The upstream refused the refresh token: the user must connect again.',
  upstream_unavailable: 'The upstream could not be reached; renewal is retried.',
  upstream_timeout: 'The upstream did not answer in time; renewal is retried.',
  upstream_error: 'The upstream answered with an error; renewal is retried.',
};

export function explain(code: string): string | null {
  return EXPLAINED[code] ?? null;
}
