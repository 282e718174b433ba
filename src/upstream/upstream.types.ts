import type { Readable } from 'node:stream';
import type { IncomingHttpHeaders } from 'node:http';
import type { Attributes } from '@opentelemetry/api';
import type { UpstreamAbort, UpstreamBody } from './streamed-request.js';

/** A token response (spec 2.2). `scope` is null when the answer carries none (refresh answers, spec 4.1). */
export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  scope: string[] | null;
  tokenType: string;
}

/** What cws-connect keeps of /userinfo (spec 2.6; the field names are not shown, so several are tried). */
export interface UpstreamUser {
  id: string;
  email: string | null;
  username: string | null;
  scopes: string[] | null;
}

export interface ResourceRequest {
  method: string;
  /** Path relative to the environment's API URL, starting with '/', query string included as given. */
  path: string;
  headers: Record<string, string | string[]>;
  body?: Readable | string | Buffer | null;
  accessToken: string;
  /** Idempotent calls may be retried on connection errors and 502/503/504. */
  retry?: boolean;
  /** Or an UpstreamAbort (cheaper per call than an AbortController). */
  signal?: AbortSignal | UpstreamAbort;
  /** Attributes of the call's span (telemetry/client-spans.ts: ids, environment, token kind; never a secret). */
  trace?: Attributes | null;
}

export interface ResourceResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The answer's body as it arrives: pipe(), text(), dump() or an async iteration, once (streamed-request.ts). */
  body: UpstreamBody;
}
