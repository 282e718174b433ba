import type { Response } from 'express';
import type { ConnectSessionEntity } from './connect-session.entity.js';

export type PopupOutcome = { status: 'connected'; connectionId: string } | { status: 'error'; error: string; connectionId?: string };

export interface CompletionTarget {
  /** The only origin the outcome is posted to. */
  origin: string;
  /** Where the window goes when it has no opener (the flow was not opened by the module, or the link was copied). */
  fallbackUrl: string;
}

/** The message the browser module waits for; packages/connect-browser reads exactly this shape. */
export const MESSAGE_TYPE = 'cws-connect:result';

/**
 * A small page that hands the outcome to its opener and closes. The script is inline under a per-response
 * nonce; every value in it is JSON with `<` escaped, so nothing in the query can end the script element.
 */
export function completionPage(o: { outcome: PopupOutcome; nonce: string; target: CompletionTarget | null }): string {
  const ok = o.outcome.status === 'connected';
  const title = ok ? 'Connected' : 'Connection not completed';
  const text = o.target
    ? 'You can close this window.'
    : "The page that started this connection is no longer allowed by the tenant's settings; the result was not sent to it.";
  const script = o.target
    ? `<script nonce="${o.nonce}">(function () {
  var message = ${json({ type: MESSAGE_TYPE, ...o.outcome })};
  var origin = ${json(o.target.origin)};
  if (window.opener) {
    window.opener.postMessage(message, origin);
    setTimeout(function () { window.close(); }, 1500);
  } else {
    window.location.replace(${json(o.target.fallbackUrl)});
  }
})();</script>`
    : '';
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<style>body{font:16px/1.5 system-ui,sans-serif;max-width:30rem;margin:4rem auto;padding:0 1rem;color:#222}</style></head>` +
    `<body><h1>${title}</h1><p>${text}</p>${script}</body></html>`
  );
}

function json(v: unknown): string {
  return JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** Where a popup flow ends: the completion page of its session, the outcome in the query (nothing secret). */
export function redirectToCompletion(res: Response, session: ConnectSessionEntity, params: Record<string, string>): void {
  res.redirect(302, `/oauth/complete/${session.id}?${new URLSearchParams(params).toString()}`);
}
