// @ts-check
/**
 * cws-connect in the browser: opens a connect URL in a popup and resolves with the connection id.
 *
 *   import { open } from 'https://connect.example.com/sdk/connect-browser.js';
 *   const { connectionId } = await open(connectUrl);
 *
 * Where the browser blocks the popup, the whole page goes to the connect URL instead and comes back to the
 * session's returnUrl with `?status=…` (read it there with `resultFromUrl()`). No dependencies.
 */

/** The message the service's completion page posts (src/connect/connect-completion-page.ts). */
const MESSAGE_TYPE = 'cws-connect:result';
/** How long a closed popup may still deliver its message (the page posts, then closes). */
const CLOSE_GRACE_MS = 400;

/** A connect flow that did not end with a connection: `code` says why. */
export class CwsConnectError extends Error {
  /**
   * @param {string} code `access_denied`, `not_admin`, `expired`, `closed`, `popup_blocked`, or another OAuth
   *   or service error code (`token_exchange_failed`, `userinfo_failed`, `upstream_unavailable`, …)
   * @param {string | undefined} [connectionId] set with `not_admin`: the connection exists but is not an admin's
   */
  constructor(code, connectionId) {
    super(MESSAGES[code] ?? `The connection failed (${code}).`);
    this.name = 'CwsConnectError';
    /** @type {string} */
    this.code = code;
    /** @type {string | undefined} */
    this.connectionId = connectionId;
  }
}

/** @type {Record<string, string>} */
const MESSAGES = {
  access_denied: 'The user declined the connection.',
  not_admin: 'The account that signed in is not a company administrator.',
  expired: 'The connect link has expired or was already used: create a new connect session.',
  closed: 'The connect window was closed before the connection was made.',
  popup_blocked: 'The browser blocked the connect window.',
};

/**
 * Runs the connect flow of `connectUrl` (from `POST /v1/tenants/{id}/connect-sessions`).
 *
 * @param {string} connectUrl
 * @param {{ fallback?: 'redirect' | 'none', width?: number, height?: number }} [options]
 *   `fallback`: what to do when the popup is blocked: `redirect` (default) sends this page to the connect URL
 *   (the returned promise then never settles: the page is going away); `none` rejects with `popup_blocked`.
 * @returns {Promise<{ status: 'connected', connectionId: string }>}
 */
export function open(connectUrl, options = {}) {
  const url = new URL(connectUrl, window.location.href);
  const serviceOrigin = url.origin;
  const popupUrl = new URL(url);
  popupUrl.searchParams.set('display', 'popup');

  const width = options.width ?? 520;
  const height = options.height ?? 720;
  const left = Math.max(0, Math.round(window.screenX + (window.outerWidth - width) / 2));
  const top = Math.max(0, Math.round(window.screenY + (window.outerHeight - height) / 3));
  const popup = window.open(popupUrl.toString(), 'cws-connect', `popup=yes,width=${width},height=${height},left=${left},top=${top}`);

  if (!popup || popup.closed) {
    if (options.fallback === 'none') return Promise.reject(new CwsConnectError('popup_blocked'));
    window.location.assign(url.toString());
    return new Promise(() => {});
  }

  return new Promise((resolve, reject) => {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let closing;
    const watch = setInterval(() => {
      if (popup.closed && closing === undefined) closing = setTimeout(() => settle(new CwsConnectError('closed')), CLOSE_GRACE_MS);
    }, 200);

    /** @param {MessageEvent} event */
    const onMessage = (event) => {
      // Only the completion page of this service, in the popup opened here, can answer.
      if (event.origin !== serviceOrigin || event.source !== popup) return;
      const data = event.data;
      if (!data || typeof data !== 'object' || data.type !== MESSAGE_TYPE) return;
      if (data.status === 'connected' && typeof data.connectionId === 'string')
        settle({ status: 'connected', connectionId: data.connectionId });
      else
        settle(
          new CwsConnectError(
            typeof data.error === 'string' ? data.error : 'connect_failed',
            typeof data.connectionId === 'string' ? data.connectionId : undefined,
          ),
        );
    };

    /** @param {{ status: 'connected', connectionId: string } | CwsConnectError} outcome */
    const settle = (outcome) => {
      clearInterval(watch);
      clearTimeout(closing);
      window.removeEventListener('message', onMessage);
      if (!popup.closed) popup.close();
      if (outcome instanceof CwsConnectError) reject(outcome);
      else resolve(outcome);
    };

    window.addEventListener('message', onMessage);
  });
}

/**
 * The outcome a full-page flow (the popup fallback, or a plain link) brought back to the returnUrl, or null
 * when the URL carries none. A failure is returned as a CwsConnectError, not thrown.
 *
 * @param {string} [href] default: this page's address
 * @returns {{ status: 'connected', connectionId: string } | CwsConnectError | null}
 */
export function resultFromUrl(href = window.location.href) {
  const params = new URL(href).searchParams;
  const status = params.get('status');
  const connectionId = params.get('connectionId') ?? undefined;
  if (status === 'connected' && connectionId) return { status: 'connected', connectionId };
  if (status === 'error') return new CwsConnectError(params.get('error') ?? 'connect_failed', connectionId);
  return null;
}

/** `cwsConnect.open(connectUrl)` for those who prefer one name. */
export const cwsConnect = { open, resultFromUrl, CwsConnectError };
export default cwsConnect;
