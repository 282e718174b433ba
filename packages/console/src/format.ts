/** Times in UTC, to the second: the same on every operator's screen and in the logs. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function ms(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : `${n.toLocaleString('en-US')} ms`;
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
