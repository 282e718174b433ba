/** The most of `times` (ms) that fall in any half-open window of `spanMs`: a sliding count, not clock windows. */
export function mostInAnyWindow(times: number[], spanMs: number): number {
  const sorted = [...times].sort((x, y) => x - y);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i] - sorted[j] >= spanMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}
