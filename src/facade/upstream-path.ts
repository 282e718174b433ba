/**
 * The one canonicalisation of a path the facade sends upstream (docs/facade.md, "The proxy base").
 *
 * Decoded once, `\` read as a separator, dot segments resolved: that canonical form is what an upstream (or
 * any server between) could make of the bytes, so the base check and the admin/user choice are both made on
 * it. Only a plain relative path goes out: one whose canonical form is the path as sent, segment for segment.
 * Anything else (an encoded separator, a dot segment, a backslash, a second layer of encoding, a control
 * character, an empty segment) is refused before any upstream call: a legitimate caller never needs them.
 */

export type PathVerdict =
  /** `segments`: the decoded segments of the canonical form (a trailing slash adds no segment). */
  { ok: true; segments: string[] } | { ok: false; reason: 'nul' | 'not_plain' | 'outside_base' };

/** A C0 control character or DEL (NUL included). */
function hasControl(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

function hasNul(s: string): boolean {
  return s.includes('\u0000');
}

/**
 * `raw`: the path after the facade route's prefix, without the query, exactly as the caller sent it,
 * e.g. `webhooks/h1` for `/proxy/webhooks/h1`. An empty path is refused.
 */
export function checkUpstreamPath(raw: string): PathVerdict {
  if (raw === '') return { ok: false, reason: 'not_plain' };
  // The fast way for the common case: nothing encoded, no backslash, no dot or empty segment.
  if (!raw.includes('%') && !raw.includes('\\') && !hasControl(raw) && !raw.includes('#')) {
    const parts = raw.split('/');
    if (parts[parts.length - 1] === '') parts.pop(); // one trailing slash is plain
    if (parts.length > 0 && parts.every((p) => p !== '' && p !== '.' && p !== '..')) return { ok: true, segments: parts };
  }
  return slowCheck(raw);
}

function slowCheck(raw: string): PathVerdict {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return { ok: false, reason: 'not_plain' }; // a malformed escape: no canonical form
  }
  if (hasNul(decoded)) return { ok: false, reason: 'nul' };
  const canonical = resolveDots(decoded.replaceAll('\\', '/').split('/'));
  if (canonical === null) return { ok: false, reason: 'outside_base' };

  // Plain: the raw path, split where the caller put separators and decoded per segment, is the canonical form.
  const asSent = raw.split('/');
  if (asSent[asSent.length - 1] === '') asSent.pop();
  if (asSent.length === 0 || asSent.length !== canonical.length) return { ok: false, reason: 'not_plain' };
  for (let i = 0; i < asSent.length; i++) {
    const segment = decodeOrNull(asSent[i]);
    if (segment === null || segment !== canonical[i] || !plainSegment(segment)) return { ok: false, reason: 'not_plain' };
  }
  return { ok: true, segments: canonical };
}

/** A decoded segment that needs no interpretation: no second layer of encoding, no control character, no separator. */
function plainSegment(segment: string): boolean {
  return (
    segment !== '' &&
    segment !== '.' &&
    segment !== '..' &&
    !segment.includes('%') &&
    !segment.includes('\\') &&
    !segment.includes('/') &&
    !segment.includes('#') &&
    !hasControl(segment)
  );
}

/** RFC 3986 5.2.4 on segments; null when `..` would climb above the base. Empty segments are dropped from the result. */
function resolveDots(parts: string[]): string[] | null {
  const out: string[] = [];
  for (const part of parts) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length === 0) return null;
      out.pop();
      continue;
    }
    out.push(part);
  }
  return out;
}

function decodeOrNull(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/**
 * A typed route's path parameter (`{workflowId}`, `{tenantId}`), raw as sent: decoded once. NUL is bad input
 * (`validation_failed`); a value that is not one plain segment could move the upstream path (`invalid_path`).
 */
export function checkParam(raw: string): { ok: true; value: string } | { ok: false; reason: 'nul' | 'not_plain' } {
  if (!raw.includes('%') && !raw.includes('\\') && !hasControl(raw) && raw !== '.' && raw !== '..' && raw !== '')
    return { ok: true, value: raw };
  const value = decodeOrNull(raw);
  if (value !== null && hasNul(value)) return { ok: false, reason: 'nul' };
  if (hasNul(raw)) return { ok: false, reason: 'nul' };
  if (value === null || !plainSegment(value)) return { ok: false, reason: 'not_plain' };
  return { ok: true, value };
}
