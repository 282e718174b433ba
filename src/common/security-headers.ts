import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet from 'helmet';

/**
 * The usual security headers on every answer, set in the front door before anything else, so Express's
 * routes, the facade's and the receiver's alike carry them (`X-Content-Type-Options: nosniff`,
 * `Referrer-Policy: no-referrer`, `X-Frame-Options`, `Strict-Transport-Security`, …). A route that sets its own
 * (the console's and the connect pages' strict Content-Security-Policy, a pass-through answer's headers from
 * the upstream) replaces helmet's; helmet never sets a Content-Type. Three are left out on purpose:
 * - Content-Security-Policy: the console and the connect pages set their own strict one; the OpenAPI UI at
 *   /docs runs an inline script that helmet's default would block, and a JSON answer runs nothing.
 * - Cross-Origin-Opener-Policy: the connect page runs in a popup that reports to the partner's page through
 *   `window.opener` (packages/connect-browser); `same-origin` would cut that link.
 * - Cross-Origin-Resource-Policy: partner pages load `/sdk/connect-browser.js` from their own origin.
 */
const middleware = helmet({
  contentSecurityPolicy: false,
  crossOriginOpenerPolicy: false,
  crossOriginResourcePolicy: false,
});

/**
 * helmet's headers, as its middleware sets them (names, values, order), taken once: with this configuration
 * they depend on nothing in the request, and a loop over them costs a proxied call a fraction of helmet's chain
 * of nine middlewares. What helmet removes (X-Powered-By) is not set yet when the front door runs, and Express's
 * is disabled (service.ts).
 */
const HEADERS: ReadonlyArray<readonly [string, string]> = (() => {
  const set: Array<readonly [string, string]> = [];
  const recorder = { setHeader: (name: string, value: string) => set.push([name, value]), removeHeader: () => undefined };
  middleware({} as IncomingMessage, recorder as unknown as ServerResponse, () => undefined);
  return set;
})();

export function setSecurityHeaders(res: ServerResponse): void {
  for (let i = 0; i < HEADERS.length; i++) res.setHeader(HEADERS[i][0], HEADERS[i][1]);
}

/** What every answer carries, set on a response that has none of it yet: the request id and the security headers. */
export function setAnswerHeaders(res: ServerResponse, requestId: string): void {
  res.setHeader('x-request-id', requestId);
  setSecurityHeaders(res);
}

/** The names of setAnswerHeaders's headers, in lower case. */
export const ANSWER_HEADER_NAMES: ReadonlySet<string> = new Set(['x-request-id', ...HEADERS.map(([name]) => name.toLowerCase())]);

/** The same headers as a raw header list (`writeHead`'s flat array of names and values), the request id's value left empty. */
export const ANSWER_HEADER_LIST: readonly string[] = ['x-request-id', '', ...HEADERS.flat()];

/** The security headers as header lines, for an answer the server writes on the socket itself (edge/http-server.ts). */
export const SECURITY_HEADER_LINES = HEADERS.map(([name, value]) => `${name}: ${value}\r\n`).join('');
