/**
 * Parses a space-separated scope parameter (RFC 6749 3.3: single spaces, no empty entries). Returns null
 * when it is malformed, holds a duplicate or a scope outside `allowed`.
 */
export function parseScopeList(value: string, allowed: ReadonlySet<string>): string[] | null {
  if (value === '') return null;
  const scopes = value.split(' ');
  const seen = new Set<string>();
  for (const scope of scopes) {
    if (scope === '' || seen.has(scope) || !allowed.has(scope)) return null;
    seen.add(scope);
  }
  return scopes;
}
