import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AppError } from '../common/app-error.js';
import { AppExceptionFilter } from '../common/app-exception.filter.js';
import { requestIdOf } from '../common/request-id.js';

/**
 * The connect and callback routes are opened by a person's browser: a domain error there is a small
 * HTML page (same status, same code); API clients asking for JSON get the usual JSON error.
 */
@Catch()
export class BrowserErrorFilter implements ExceptionFilter {
  private readonly json = new AppExceptionFilter();

  catch(exception: unknown, host: ArgumentsHost): void {
    const req = host.switchToHttp().getRequest<Request>();
    const res = host.switchToHttp().getResponse<Response>();
    if (!(exception instanceof AppError) || res.headersSent || !wantsHtml(req)) return this.json.catch(exception, host);
    const requestId = requestIdOf(req, res);
    res
      .status(exception.status)
      .setHeader('x-request-id', requestId)
      .setHeader('content-type', 'text/html; charset=utf-8')
      .setHeader('cache-control', 'no-store')
      // The page's own URL may be a connect link: its token must not leave in a Referer.
      .setHeader('referrer-policy', 'no-referrer')
      .send(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Connection failed</title>` +
          `<meta name="viewport" content="width=device-width, initial-scale=1">` +
          `<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:.1rem .3rem}</style></head>` +
          `<body><h1>This connection could not be completed</h1><p>${escapeHtml(exception.message)}</p>` +
          `<p>Error <code>${exception.code}</code>, request <code>${escapeHtml(requestId)}</code>.</p></body></html>`,
      );
  }
}

function wantsHtml(req: Request): boolean {
  const accept = req.headers.accept ?? '';
  return accept.includes('text/html');
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
