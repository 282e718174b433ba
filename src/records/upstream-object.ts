import { createHash } from 'node:crypto';

/** One workflow as the upstream answered it, with what sync compares: its digest, version and lastModified. */
export interface UpstreamObject {
  id: string;
  /** The object as canonical JSON (keys sorted): what is sealed, and what the digest is of. */
  json: string;
  digest: string;
  /** versionNumber (spec 2.4), when it is a number. */
  version: number | null;
  /** lastModified (spec 2.4), when it is a time. */
  lastModified: Date | null;
}

/** The object of one listed item, or null when it is not an object with a string (or number) id in `idField`. */
export function upstreamObject(item: unknown, idField: string): UpstreamObject | null {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return null;
  const fields = item as Record<string, unknown>;
  const rawId = fields[idField];
  const id = typeof rawId === 'string' ? rawId : typeof rawId === 'number' && Number.isFinite(rawId) ? String(rawId) : null;
  if (id === null || id.length === 0 || id.length > 500) return null;
  const json = canonicalJson(item);
  const version = typeof fields.versionNumber === 'number' && Number.isSafeInteger(fields.versionNumber) ? fields.versionNumber : null;
  const modified = typeof fields.lastModified === 'string' ? new Date(fields.lastModified) : null;
  return {
    id,
    json,
    digest: createHash('sha256').update(json).digest('base64url'),
    version,
    lastModified: modified !== null && !Number.isNaN(modified.getTime()) ? modified : null,
  };
}

/**
 * Whether `incoming` may replace what is stored: not older by versionNumber, then by lastModified. What the
 * upstream does not say (a missing version or time) does not make it older.
 */
export function newer(
  incoming: Pick<UpstreamObject, 'version' | 'lastModified'>,
  stored: Pick<UpstreamObject, 'version' | 'lastModified'>,
): boolean {
  if (incoming.version !== null && stored.version !== null && incoming.version !== stored.version) return incoming.version > stored.version;
  if (incoming.lastModified !== null && stored.lastModified !== null)
    return incoming.lastModified.getTime() >= stored.lastModified.getTime();
  return true;
}

/** JSON with every object's keys sorted: one text per value, whatever order the upstream wrote. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v)).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}
