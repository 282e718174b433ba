import { createHash, randomBytes } from 'node:crypto';
import type { Request } from 'express';
import { AppError } from '../common/app-error.js';
import type { Clock } from '../common/clock.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';
import type { ConnectSessionsRepository } from './connect-sessions.repository.js';

export const STATE_LIFETIME_MS = 10 * 60_000;

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
 * The method arities matter: passport-oauth2 picks the call shape by them.
 */
export class ConnectStateStore {
  constructor(
    private readonly sessions: ConnectSessionsRepository,
    private readonly clock: Clock,
  ) {}

  store(req: Request, _meta: unknown, callback: StoreCallback): void {
    const tokenHash = (req as ConnectRequest).connectTokenHash;
    if (!tokenHash) return callback(new Error('connect token missing on the request'));
    const state = randomBytes(32).toString('base64url');
    const now = this.clock.now();
    this.sessions.start(tokenHash, hashState(state), now, new Date(now.getTime() + STATE_LIFETIME_MS)).then(
      (session) => {
        if (!session) return callback(new AppError('connect_session_expired', 'This connect link has expired or was already used. Ask for a new one.'));
        (req as ConnectRequest).connectSession = session;
        callback(null, state);
      },
      (e: Error) => callback(e),
    );
  }

  verify(req: Request, state: string, _meta: unknown, callback: VerifyCallback): void {
    this.consume(state).then(
      (session) => {
        (req as ConnectRequest).connectSession = session;
        callback(null, true, session);
      },
      (e: Error) => (e instanceof AppError ? callback(null, false, e) : callback(e, false)),
    );
  }

  /**
   * Consumes a state once. An unknown, reused or expired state is connect_state_invalid (API.md 5.2);
   * connect_session_expired is for a connect link opened too late or twice.
   */
  async consume(state: unknown): Promise<ConnectSessionEntity> {
    if (typeof state !== 'string' || !state) throw new AppError('connect_state_invalid', 'The OAuth state is missing.');
    const now = this.clock.now();
    const session = await this.sessions.consumeState(hashState(state), now);
    if (!session) throw new AppError('connect_state_invalid', 'The OAuth state is unknown or was already used. Start the connection again.');
    if (!session.stateExpiresAt || session.stateExpiresAt <= now) {
      throw new AppError('connect_state_invalid', 'The OAuth state has expired (states live 10 minutes). Start the connection again.');
    }
    return session;
  }

  peek(state: unknown): Promise<ConnectSessionEntity | null> {
    if (typeof state !== 'string' || !state) return Promise.resolve(null);
    return this.sessions.findByStateHash(hashState(state));
  }
}

export function hashState(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
