import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { parse as parseCookies } from 'cookie';
import type { CookieOptions, Request } from 'express';
import { AppError } from '../common/app-error.js';
import { BatchedLookup } from '../common/batched-lookup.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { sha256 } from '../common/hash.js';
import type { Principal } from './auth.decorators.js';
import { ConsoleSessionEntity } from './console-session.entity.js';
import { ConsoleSessionsRepository } from './console-sessions.repository.js';

export const CONSOLE_COOKIE = 'cws_console';
export const CSRF_HEADER = 'x-csrf-token';
/** A signed-in console lasts a working day; signing out ends it at once. */
export const CONSOLE_SESSION_LIFETIME_MS = 8 * 3600_000;

const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export interface ConsoleSessionView {
  /** Sent back in x-csrf-token with every call the page makes: a cross-site page cannot read it. */
  csrfToken: string;
  expiresAt: Date;
}

/**
 * Operator sessions of the web console, kept in PostgreSQL (any instance serves any session). The cookie
 * holds a 256-bit secret; the table holds its SHA-256. A session stands for the operator key only together
 * with its CSRF token, derived from the secret, so a request another site makes the browser send carries the
 * cookie at most, never the token.
 */
@Injectable()
export class ConsoleSessionsService {
  private readonly secure: boolean;
  private readonly path: string;
  /** The lane of clients past their failure bound (AuthThrottle): their lookups share one query at a time. */
  private readonly sharedLookup: BatchedLookup<string, ConsoleSessionEntity>;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly repo: ConsoleSessionsRepository,
    private readonly clock: Clock,
  ) {
    const publicUrl = new URL(config.publicUrl);
    this.secure = publicUrl.protocol === 'https:';
    // The page calls the service's own /v1 routes, so the cookie is scoped to the service's path, no wider.
    this.path = publicUrl.pathname.endsWith('/') ? publicUrl.pathname : `${publicUrl.pathname}/`;
    this.sharedLookup = new BatchedLookup(async (hashes) => {
      const sessions = await repo.findLiveMany(
        hashes.map((h) => Buffer.from(h, 'hex')),
        clock.now(),
      );
      return new Map(sessions.map((session) => [session.tokenHash.toString('hex'), session]));
    });
  }

  /** Whether a request offers a console session rather than an API key (an Authorization header always wins). */
  presentedBy(req: Request): boolean {
    return req.headers.authorization === undefined && sessionTokenOf(req) !== null;
  }

  async start(): Promise<ConsoleSessionView & { id: string; token: string }> {
    const now = this.clock.now();
    await this.repo.deleteExpired(now);
    const token = randomBytes(32).toString('base64url');
    const expiresAt = new Date(now.getTime() + CONSOLE_SESSION_LIFETIME_MS);
    const id = randomUUID();
    await this.repo.insert(Object.assign(new ConsoleSessionEntity(), { id, tokenHash: sha256(token), createdAt: now, expiresAt }));
    return { id, token, csrfToken: csrfTokenFor(token), expiresAt };
  }

  /** The signed-in session of this browser, for the page to learn its CSRF token. */
  async current(req: Request): Promise<ConsoleSessionView> {
    const token = sessionTokenOf(req);
    const session = token ? await this.repo.findLive(sha256(token), this.clock.now()) : null;
    if (!token || !session) throw new AppError('unauthorized', 'Not signed in to the console.');
    return { csrfToken: csrfTokenFor(token), expiresAt: session.expiresAt };
  }

  /**
   * The operator principal for a request that carries a live session cookie and its CSRF token. An answer
   * that shows a secret (a new API key, an events secret) is refused: the console never holds one. With
   * `shareLookup` (a client past its failure bound) the session is read in a query shared with the others waiting.
   */
  async authorize(req: Request, showsSecret = false, shareLookup = false): Promise<Principal> {
    const token = sessionTokenOf(req);
    if (!token) throw new AppError('unauthorized', 'Not signed in to the console.');
    const presented = req.headers[CSRF_HEADER];
    const expected = Buffer.from(csrfTokenFor(token));
    const given = Buffer.from(typeof presented === 'string' ? presented : '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new AppError('forbidden', `A console session needs its CSRF token in the ${CSRF_HEADER} header.`);
    }
    const hash = sha256(token);
    const session = shareLookup ? await this.sharedLookup.get(hash.toString('hex')) : await this.repo.findLive(hash, this.clock.now());
    if (!session) throw new AppError('unauthorized', 'The console session has ended: sign in again.');
    if (showsSecret) throw secretRefusedToConsole();
    return { kind: 'operator', consoleSessionId: session.id };
  }

  /** Ends this browser's session; answers the id of the session that ended, null when there was none. */
  async end(req: Request): Promise<string | null> {
    const token = sessionTokenOf(req);
    return token ? this.repo.deleteByTokenHash(sha256(token)) : null;
  }

  cookieOptions(expiresAt?: Date): CookieOptions {
    return { httpOnly: true, sameSite: 'strict', secure: this.secure, path: this.path, ...(expiresAt ? { expires: expiresAt } : {}) };
  }
}

export function secretRefusedToConsole(): AppError {
  return new AppError('forbidden', 'This answer shows a secret once: call it with the operator key, not from the console.');
}

function sessionTokenOf(req: Request): string | null {
  const header = req.headers.cookie;
  if (!header) return null;
  const token = parseCookies(header)[CONSOLE_COOKIE];
  return token && TOKEN_PATTERN.test(token) ? token : null;
}

function csrfTokenFor(token: string): string {
  return createHmac('sha256', token).update('cws-console csrf').digest('base64url');
}
