/**
 * The next page of a listing from its RFC 8288 `Link: <…>; rel="next"`, as a path relative to the environment's
 * API URL, or null when there is none. A target outside that URL's origin and path prefix is never followed (the
 * user's token goes only where the environment's API is): it is null, and the listing ends there incomplete.
 */
export function nextPagePath(header: string | string[] | undefined, currentPath: string, apiUrl: string): string | null | never {
  const target = nextTarget(header);
  if (target === null) return null;
  const base = new URL(apiUrl.endsWith('/') ? apiUrl : `${apiUrl}/`);
  let url: URL;
  try {
    url = new URL(target, new URL(currentPath.replace(/^\//, ''), base));
  } catch {
    throw new OffOrigin();
  }
  const prefix = base.pathname;
  if (url.origin !== base.origin || !url.pathname.startsWith(prefix) || url.username || url.password) throw new OffOrigin();
  const path = `/${url.pathname.slice(prefix.length)}${url.search}`;
  if (path.split('/').some((s) => s === '..' || s === '.')) throw new OffOrigin();
  return path;
}

/** A `rel="next"` target outside the environment's API URL: the listing is incomplete. */
export class OffOrigin extends Error {
  constructor() {
    super("GET /workflows named a next page outside the environment's API URL: not followed");
  }
}

/** The target of the first link whose rel names `next`, or null. */
export function nextTarget(header: string | string[] | undefined): string | null {
  const text = Array.isArray(header) ? header.join(',') : header;
  if (!text) return null;
  const link = /<([^>]*)>((?:\s*;\s*[^;,]+)*)/g;
  for (let m = link.exec(text); m !== null; m = link.exec(text)) {
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]+))/i.exec(m[2]);
    const rels = (rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/);
    if (rels.includes('next')) return m[1];
  }
  return null;
}
