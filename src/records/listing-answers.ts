import { AppError } from '../common/app-error.js';
import type { WorkflowListing } from '../config/environment-config.js';
import type { Environments } from '../config/environments.js';
import { readAnswer } from '../upstream/upstream-answers.js';
import type { ResourceResponse } from '../upstream/upstream.types.js';
import { OffOrigin } from './link-header.js';
import { upstreamObject, type UpstreamObject } from './upstream-object.js';

/** When a listing that failed on its own is tried again (sooner when SYNC_POLL_INTERVAL is shorter). */
export const RETRY_MS = 60_000;
const MAX_PAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_LISTING: WorkflowListing = { query: '', items: '', idField: 'id' };

/** A listing that did not complete: nothing is removed. `failed`: the listing's own failure (not a budget refusal). */
export class Unlisted extends Error {
  constructor(
    message: string,
    readonly failed: boolean,
    readonly retryInMs: number,
  ) {
    super(message);
  }
}

/** Another instance holds the user now: the listing stops and stores nothing. */
export class LeaseLost extends Error {}

/** A failure of the listing as the user's sync row states it; null: the lease was lost (nothing to store). */
export function toUnlisted(e: unknown): Unlisted | null {
  if (e instanceof LeaseLost) return null;
  if (e instanceof OffOrigin) return new Unlisted(e.message, true, RETRY_MS);
  if (e instanceof AppError) {
    if (e.code === 'quota_exhausted')
      return new Unlisted("the company's upstream budget is spent (quota_exhausted)", false, (e.retryAfterSeconds ?? 30) * 1000);
    return new Unlisted(`${e.code}: ${e.message}`, true, RETRY_MS);
  }
  return new Unlisted(
    e instanceof SyntaxError ? 'GET /workflows answered something that is not JSON' : 'GET /workflows failed',
    true,
    RETRY_MS,
  );
}

/** The environment's listing of workflows (CWS_<ENV>_WORKFLOWS_*), or the default one. */
export function listingOf(environments: Environments, environment: string): WorkflowListing {
  return environments.find(environment)?.listing ?? DEFAULT_LISTING;
}

/** An answer's body, read to at most MAX_PAGE_BYTES whether or not it names its length. */
export async function bodyOf(res: ResourceResponse): Promise<string> {
  try {
    return (await readAnswer(res, MAX_PAGE_BYTES)).text;
  } catch (e) {
    if (e instanceof AppError && e.code === 'upstream_error')
      throw new Unlisted(`an answer of GET /workflows is larger than ${MAX_PAGE_BYTES} bytes`, true, RETRY_MS);
    throw e;
  }
}

/** The objects of one page; a page whose shape is not the configured one fails the listing (nothing is removed). */
export function objectsOf(text: string, listing: WorkflowListing, page: number): UpstreamObject[] {
  const body = JSON.parse(text) as unknown;
  const list = listing.items
    ? (body as Record<string, unknown> | null)?.[listing.items]
    : Array.isArray(body)
      ? body
      : (body as Record<string, unknown> | null)?.workflows;
  if (!Array.isArray(list))
    throw new Unlisted(`page ${page + 1} of GET /workflows holds no list where CWS_<ENV>_WORKFLOWS_ITEMS says`, true, RETRY_MS);
  const objects: UpstreamObject[] = [];
  for (const item of list) {
    const object = upstreamObject(item, listing.idField);
    if (object === null)
      throw new Unlisted(`an item of GET /workflows has no "${listing.idField}" (CWS_<ENV>_WORKFLOW_ID_FIELD)`, true, RETRY_MS);
    objects.push(object);
  }
  return objects;
}
