import { Controller, Get, Param, Query, Req, Res, UseFilters } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { AppError } from '../common/app-error.js';
import { Public } from '../auth/auth.decorators.js';
import { BrowserErrorFilter } from './browser-error.filter.js';
import { connectBrowserModule } from './connect-browser-asset.js';
import { ConnectPopupService } from './connect-popup.service.js';

/**
 * What the browser module needs from the service: the module itself, and the page a popup flow ends on.
 * Browser routes, like /connect and /oauth/callback: outside the API document.
 */
@Public()
@ApiExcludeController()
@UseFilters(BrowserErrorFilter)
@Controller()
export class ConnectPopupController {
  constructor(private readonly popup: ConnectPopupService) {}

  @Get('oauth/complete/:sessionId')
  async complete(@Param('sessionId') sessionId: string, @Query() query: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const { html, nonce } = await this.popup.completion(sessionId, query);
    res
      .status(200)
      .setHeader('content-type', 'text/html; charset=utf-8')
      .setHeader('cache-control', 'no-store')
      .setHeader('referrer-policy', 'no-referrer')
      .setHeader('x-frame-options', 'DENY')
      .setHeader(
        'content-security-policy',
        `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      )
      .send(html);
  }

  /** The stable address: cached for a day, revalidated by its ETag. */
  @Get('sdk/connect-browser.js')
  module(@Req() req: Request, @Res() res: Response): void {
    sendModule(req, res, 'public, max-age=86400');
  }

  /** The address named by content hash (`/sdk/connect-browser.<hash>.js`, in the stable one's Link header): cached forever. */
  @Get('sdk/connect-browser.:hash.js')
  pinned(@Param('hash') hash: string, @Req() req: Request, @Res() res: Response): void {
    if (hash !== connectBrowserModule().hash) throw new AppError('not_found', 'No such version of the browser module.');
    sendModule(req, res, 'public, max-age=31536000, immutable');
  }
}

function sendModule(req: Request, res: Response, cacheControl: string): void {
  const asset = connectBrowserModule();
  res
    .setHeader('content-type', 'text/javascript; charset=utf-8')
    .setHeader('cache-control', cacheControl)
    .setHeader('etag', asset.etag)
    .setHeader('link', `</sdk/connect-browser.${asset.hash}.js>; rel="alternate"`)
    // Module scripts load in CORS mode: partner pages on any origin import it.
    .setHeader('access-control-allow-origin', '*')
    .setHeader('cross-origin-resource-policy', 'cross-origin')
    .setHeader('x-content-type-options', 'nosniff');
  if (req.headers['if-none-match'] === asset.etag) {
    res.status(304).end();
    return;
  }
  res.status(200).send(asset.body);
}
