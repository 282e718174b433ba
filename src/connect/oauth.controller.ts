import { Controller, Get, Param, Req, Res, UseFilters } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { Public } from '../auth/auth.decorators.js';
import { BrowserErrorFilter } from './browser-error.filter.js';
import { ConnectService } from './connect.service.js';

/** The two routes a person's browser visits during a connection. */
@Public()
@ApiExcludeController()
@UseFilters(BrowserErrorFilter)
@Controller()
export class OAuthController {
  constructor(private readonly connect: ConnectService) {}

  @Get('connect/:token')
  begin(@Param('token') token: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.connect.begin(token, req, res);
  }

  @Get('oauth/callback')
  callback(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.connect.callback(req, res);
  }
}
