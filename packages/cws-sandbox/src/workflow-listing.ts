import { badRequest, isPlainObject } from './http-io.js';
import type { SandboxListing, SandboxListingFailure } from './types.js';
import type { WorkflowStep } from './workflow-store.js';
import { WORKFLOW_STEPS } from './workflow-store.js';

export const MAX_PAGE_SIZE = 10_000;
const MAX_FAIL_TIMES = 1_000_000;

/** Where a listing walk stands: the page number (1 = first), the store index it starts at, its step filter. */
export interface PageCursor {
  readonly page: number;
  readonly from: number;
  readonly step: WorkflowStep | undefined;
}

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{1,64}$/;
const TOKEN_TEXT = /^([1-9]\d{0,8})\.(0|[1-9]\d{0,8})\.([A-Za-z]*)$/;

/**
 * The paging of GET /workflows (a test control: the spec shows no paging) and its injected page failures. The page
 * token is the sandbox's own and opaque to clients: base64url of `page.index.step`.
 */
export class WorkflowListing {
  private pageSizeValue: number | null = null;
  private failure: SandboxListingFailure | null = null;
  /** The sandbox's own absolute URL, known once it listens: the base of the `Link` header. */
  baseUrl = '';

  constructor(initial: SandboxListing) {
    this.set(initial);
  }

  get pageSize(): number | null {
    return this.pageSizeValue;
  }

  set(listing: SandboxListing): void {
    const valid = parseListing(listing, 'listing');
    this.pageSizeValue = valid.pageSize;
    this.failure = valid.fail ?? null;
  }

  current(): { pageSize: number | null; fail: SandboxListingFailure | null } {
    return { pageSize: this.pageSizeValue, fail: this.failure && { ...this.failure } };
  }

  /** The injected status for this page, if it must fail now (consumes one of its `times`). */
  takeFailure(page: number): number | null {
    const failure = this.failure;
    if (!failure || failure.page !== page) return null;
    if (--failure.times <= 0) this.failure = null;
    return failure.status;
  }

  nextLink(cursor: PageCursor): string {
    return `<${this.baseUrl}/workflows?page=${encodeToken(cursor)}>; rel="next"`;
  }
}

export function encodeToken(cursor: PageCursor): string {
  return Buffer.from(`${cursor.page}.${cursor.from}.${cursor.step ?? ''}`, 'utf8').toString('base64url');
}

/** The cursor of a page token, or null when it is not one this sandbox issues (only its canonical form is accepted). */
export function decodeToken(token: string): PageCursor | null {
  if (!TOKEN_SHAPE.test(token)) return null;
  const m = TOKEN_TEXT.exec(Buffer.from(token, 'base64url').toString('latin1'));
  if (!m) return null;
  const step = m[3] === '' ? undefined : (m[3] as WorkflowStep);
  if (step !== undefined && !WORKFLOW_STEPS.includes(step)) return null;
  const cursor: PageCursor = { page: Number(m[1]), from: Number(m[2]), step };
  // A first page has no token; a token spelled another way (padding, other bits) is not ours.
  if (cursor.page < 2 || encodeToken(cursor) !== token) return null;
  return cursor;
}

/** Validates a listing given over HTTP, as an option or through setListing; `where` names it in errors. */
export function parseListing(value: unknown, where: string): SandboxListing {
  if (!isPlainObject(value)) throw badRequest('invalid_listing', `${where} must be a JSON object {pageSize, fail?}`);
  for (const key of Object.keys(value)) {
    if (key !== 'pageSize' && key !== 'fail') throw badRequest('invalid_listing', `${where}.${key} is not a known field`);
  }
  if (!('pageSize' in value)) throw badRequest('invalid_listing', `${where}.pageSize is required (null: not paged)`);
  const { pageSize, fail } = value;
  if (pageSize !== null && !isWhole(pageSize, 1, MAX_PAGE_SIZE))
    throw badRequest('invalid_listing', `${where}.pageSize must be null or a whole number from 1 to ${MAX_PAGE_SIZE}`);
  if (fail === undefined || fail === null) return { pageSize, fail: null };
  if (pageSize === null) throw badRequest('invalid_listing', `${where}.fail needs a pageSize (an unpaged listing has no pages)`);
  if (!isPlainObject(fail)) throw badRequest('invalid_listing', `${where}.fail must be null or {page, status, times}`);
  for (const key of Object.keys(fail)) {
    if (key !== 'page' && key !== 'status' && key !== 'times')
      throw badRequest('invalid_listing', `${where}.fail.${key} is not a known field`);
  }
  const { page, status, times } = fail;
  if (!isWhole(page, 1, 1_000_000_000)) throw badRequest('invalid_listing', `${where}.fail.page must be a whole number of at least 1`);
  if (!isWhole(status, 400, 599)) throw badRequest('invalid_listing', `${where}.fail.status must be a whole number from 400 to 599`);
  if (!isWhole(times, 1, MAX_FAIL_TIMES))
    throw badRequest('invalid_listing', `${where}.fail.times must be a whole number from 1 to ${MAX_FAIL_TIMES}`);
  return { pageSize, fail: { page, status, times } };
}

function isWhole(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}
