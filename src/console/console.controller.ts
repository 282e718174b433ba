import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Body, Controller, Delete, Get, HttpCode, Param, Post, Req, Res, UnsupportedMediaTypeException } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiExcludeEndpoint,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  ApiUnsupportedMediaTypeResponse,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiErrors, ApiRoute, ErrorResponseDto } from '../common/api-docs.js';
import { AppError } from '../common/app-error.js';
import { CONSOLE_COOKIE, ConsoleSessionsService } from '../auth/console-sessions.service.js';
import { OperatorOnly, Public } from '../auth/auth.decorators.js';
import { ASSET_NAME, CONSOLE_CSP, consoleBuildDir } from './console-assets.js';
import { ConsoleFiguresService } from './console-figures.service.js';
import { ConsoleService } from './console.service.js';
import { ConsoleFiguresDto, ConsoleSessionDto, SignInDto } from './dto/console.dto.js';

const CSRF_NOTE =
  "Security: the operator key as a bearer, or the `cws_console` session cookie with the session's CSRF token in `x-csrf-token`.";

/** The operator console: its built page and files, signing in and out, and the figures at a glance. */
@ApiTags('console')
@Controller('console')
export class ConsoleController {
  private readonly buildDir = consoleBuildDir();

  constructor(
    private readonly console: ConsoleService,
    private readonly sessions: ConsoleSessionsService,
    private readonly figures: ConsoleFiguresService,
  ) {}

  @Get()
  @Public()
  @ApiExcludeEndpoint()
  page(@Req() req: Request, @Res() res: Response): void {
    // The page loads its files relative to itself, so it must be opened as a folder: /console/.
    if (!req.path.endsWith('/')) return res.redirect(301, 'console/');
    this.send(res, 'index.html', 'no-cache');
  }

  @Get('assets/:name')
  @Public()
  @ApiExcludeEndpoint()
  asset(@Param('name') name: string, @Res() res: Response): void {
    if (!ASSET_NAME.test(name)) throw new AppError('not_found', 'No such file.');
    this.send(res, join('assets', name), 'public, max-age=31536000, immutable');
  }

  @Post('api/session')
  @Public()
  @ApiOperation({
    operationId: 'consoleSignIn',
    summary: 'Sign in to the console with the operator key',
    description:
      'Sets the HttpOnly `cws_console` session cookie. Only the operator key signs in (it is the credential, in the body); the body must be JSON.',
    security: [],
  })
  @ApiCreatedResponse({ type: ConsoleSessionDto })
  @ApiErrors('validation_failed', 'unauthorized', 'too_many_requests')
  @ApiUnsupportedMediaTypeResponse({ type: ErrorResponseDto, description: '`unsupported_media_type`: the body is not JSON.' })
  async signIn(@Req() req: Request, @Body() dto: SignInDto, @Res({ passthrough: true }) res: Response): Promise<ConsoleSessionDto> {
    // A form another site posts cannot be JSON without a preflight this service never grants.
    if (!req.is('application/json')) throw new UnsupportedMediaTypeException('Send the operator key as JSON.');
    const session = await this.console.signIn(dto.operatorKey, req);
    res.cookie(CONSOLE_COOKIE, session.token, this.sessions.cookieOptions(session.expiresAt));
    res.setHeader('cache-control', 'no-store');
    return { csrfToken: session.csrfToken, expiresAt: session.expiresAt.toISOString() };
  }

  @Get('api/session')
  @Public()
  @ApiOperation({
    operationId: 'consoleSession',
    summary: "The browser's console session: its CSRF token and end",
    description: 'Security: the `cws_console` cookie set at sign-in; `unauthorized` when there is none or it ended.',
    security: [{ consoleSession: [] }],
  })
  @ApiOkResponse({ type: ConsoleSessionDto })
  @ApiErrors('unauthorized')
  async session(@Req() req: Request, @Res({ passthrough: true }) res: Response): Promise<ConsoleSessionDto> {
    res.setHeader('cache-control', 'no-store');
    const session = await this.sessions.current(req);
    return { csrfToken: session.csrfToken, expiresAt: session.expiresAt.toISOString() };
  }

  @Delete('api/session')
  @OperatorOnly()
  @ApiBearerAuth()
  @HttpCode(204)
  @ApiRoute('consoleSignOut', 'Sign out of the console: the session ends on every instance', CSRF_NOTE)
  @ApiNoContentResponse({ description: 'The session is gone and the cookie cleared.' })
  @ApiErrors('unauthorized', 'forbidden')
  async signOut(@Req() req: Request, @Res({ passthrough: true }) res: Response): Promise<void> {
    await this.console.signOut(req);
    res.clearCookie(CONSOLE_COOKIE, this.sessions.cookieOptions());
  }

  @Get('api/figures')
  @OperatorOnly()
  @ApiBearerAuth()
  @ApiRoute('consoleFigures', "This instance's renewal and upstream figures at a glance", `From its own Prometheus metrics. ${CSRF_NOTE}`)
  @ApiOkResponse({ type: ConsoleFiguresDto })
  @ApiErrors('unauthorized', 'forbidden')
  async summary(@Res({ passthrough: true }) res: Response): Promise<ConsoleFiguresDto> {
    res.setHeader('cache-control', 'no-store');
    return this.figures.summary();
  }

  private send(res: Response, file: string, cacheControl: string): void {
    const path = join(this.buildDir, file);
    if (!existsSync(path)) {
      throw file === 'index.html'
        ? new AppError('service_unavailable', 'The console is not built: run `npm run build:console`.')
        : new AppError('not_found', 'No such file.');
    }
    res.setHeader('content-security-policy', CONSOLE_CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('cache-control', cacheControl);
    res.sendFile(path, { dotfiles: 'deny' });
  }
}
