/** A connect flow that did not end with a connection. */
export declare class CwsConnectError extends Error {
  constructor(code: string, connectionId?: string);
  /** `access_denied`, `not_admin`, `expired`, `closed`, `popup_blocked`, or another OAuth or service error code. */
  readonly code: CwsConnectErrorCode;
  /** Set with `not_admin`: the connection exists but its user is not a company administrator. */
  readonly connectionId: string | undefined;
}

export type CwsConnectErrorCode =
  | 'access_denied'
  | 'not_admin'
  | 'expired'
  | 'closed'
  | 'popup_blocked'
  | 'token_exchange_failed'
  | 'userinfo_failed'
  | 'upstream_unavailable'
  | 'connect_failed'
  | (string & {});

export interface Connected {
  status: 'connected';
  connectionId: string;
}

export interface OpenOptions {
  /** When the popup is blocked: `redirect` (default) sends the page to the connect URL; `none` rejects with `popup_blocked`. */
  fallback?: 'redirect' | 'none';
  width?: number;
  height?: number;
}

export declare function open(connectUrl: string, options?: OpenOptions): Promise<Connected>;
export declare function resultFromUrl(href?: string): Connected | CwsConnectError | null;
export declare const cwsConnect: { open: typeof open; resultFromUrl: typeof resultFromUrl; CwsConnectError: typeof CwsConnectError };
export default cwsConnect;
