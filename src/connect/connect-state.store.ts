import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import { AppError } from '../common/app-error.js';
import type { Clock } from '../common/clock.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';
import type { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { sha256 } from '../common/hash.js';

export const STATE_LIFETIME_MS = 10 * 60_000;
const COOKIE_PREFIX = 'cws_connect_';
const STATE_REFUSED =
  'The OAuth state is unknown, was already used, or belongs to a connection started in another browser. Start the connection again.';

/** What the connect flow hangs on the request for the state store and the strategy. */
export interface ConnectRequest extends Request {
  connectTokenHash?: Buffer;
  connectSession?: ConnectSessionEntity;
}

type StoreCallback = (err: Error | null, state?: string) => void;
type VerifyCallback = (err: Error | null, ok: boolean, info?: unknown) => void;

/**
 * passport-oauth2's state store, in PostgreSQL so that the callback can land on any instance: 256
 * random bits, only their SHA-256 stored, single use (consumed by one atomic UPDATE), 10 minutes.
 *
 * The state is bound to the browser that opened the connect link (RFC 6749 §10.12, RFC 9700 §4.7):
 * with it, that browser gets a cookie holding another 256 random bits (HttpOnly, SameSite=Lax so that
 * the upstream's top-level redirect back carries it, Path the callback's, one cookie per state so that
 * two flows in one browser do not overwrite each other), and only its SHA-256 is stored with the state.
 * The callback consumes the state only together with that cookie: a state or a code carried to another
 * browser is refused, and consumes nothing the browser that owns it still needs.
 *
 * The method arities matter: passport-oauth2 picks the call shape by them.
 */
export class ConnectStateStore {
  private readonly cookiePath: string;
  private readonly secure: boolean;

  constructor(
    private readonly sessions: ConnectSessionsRepository,
    private readonly clock: Clock,
    publicUrl: string,
  ) {
    const base = new URL(publicUrl);
    this.cookiePath = `${base.pathname.replace(/\/+$/, '')}/oauth/callback`;
    this.secure = base.protocol === 'https:';
  }

  store(req: Request, _meta: unknown, callback: StoreCallback): void {
    const tokenHash = (req as ConnectRequest).connectTokenHash;
    if (!tokenHash || !req.res) return callback(new Error('connect token or response missing on the request'));
    const res = req.res;
    const state = randomBytes(32).toString('base64url');
    const binding = randomBytes(32).toString('base64url');
    const now = this.clock.now();
    this.sessions.start(tokenHash, sha256(state), sha256(binding), now, new Date(now.getTime() + STATE_LIFETIME_MS)).then(
      (session) => {
        if (!session)
          return callback(new AppError('connect_session_expired', 'This connect link has expired or was already used. Ask for a new one.'));
        (req as ConnectRequest).connectSession = session;
        res.cookie(cookieName(state), binding, {
          httpOnly: true,
          sameSite: 'lax',
          secure: this.secure,
          path: this.cookiePath,
          maxAge: STATE_LIFETIME_MS,
        });
        callback(null, state);
      },
      (e: Error) => callback(e),
    );
  }

  verify(req: Request, state: string, _meta: unknown, callback: VerifyCallback): void {
    this.consume(req, state).then(
      (session) => {
        (req as ConnectRequest).connectSession = session;
        callback(null, true, session);
      },
      (e: Error) => (e instanceof AppError ? callback(null, false, e) : callback(e, false)),
    );
  }

  /**
   * Consumes the request's state once, from the browser it was issued to. An unknown, reused, expired or
   * foreign state is connect_state_invalid (API.md 5.2); connect_session_expired is for a connect link
   * opened too late or twice.
   */
  async consume(req: Request, state: unknown): Promise<ConnectSessionEntity> {
    if (typeof state !== 'string' || !state) throw new AppError('connect_state_invalid', 'The OAuth state is missing.');
    const binding = cookieOf(req, cookieName(state));
    if (!binding) throw new AppError('connect_state_invalid', STATE_REFUSED);
    const now = this.clock.now();
    const session = await this.sessions.consumeState(sha256(state), sha256(binding), now);
    if (!session) throw new AppError('connect_state_invalid', STATE_REFUSED);
    if (req.res) clearCookie(req.res, cookieName(state), this.cookiePath, this.secure);
    if (!session.stateExpiresAt || session.stateExpiresAt <= now) {
      throw new AppError('connect_state_invalid', 'The OAuth state has expired (states live 10 minutes). Start the connection again.');
    }
    return session;
  }

  peek(state: unknown): Promise<ConnectSessionEntity | null> {
    if (typeof state !== 'string' || !state) return Promise.resolve(null);
    return this.sessions.findByStateHash(sha256(state));
  }
}

/** The binding cookie of one state: its name derives from the state, so that parallel flows keep theirs. */
export function cookieName(state: string): string {
  return COOKIE_PREFIX + sha256(`cookie-name:${state}`).toString('base64url').slice(0, 16);
}

function clearCookie(res: Response, name: string, path: string, secure: boolean): void {
  res.clearCookie(name, { httpOnly: true, sameSite: 'lax', secure, path });
}

/** One cookie's value from the Cookie header (RFC 6265 §5.4 form: `name=value; name=value`). */
function cookieOf(req: Request, name: string): string | null {
  const header = req.headers.cookie;
  if (!header) return null;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim() || null;
  }
  return null;
}
