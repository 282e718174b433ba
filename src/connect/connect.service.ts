import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import type { NextFunction, Request, Response } from 'express';
import passport from 'passport';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { requestIdOf } from '../common/request-id.js';
import type { AppConfig } from '../config/app-config.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { Environments } from '../config/environments.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { UpstreamClient } from '../upstream/upstream-client.service.js';
import { TokenEndpointError, UpstreamStatusError, upstreamFailure } from '../upstream/upstream.errors.js';
import type { TokenSet } from '../upstream/upstream.types.js';
import { ConnectSessionEntity } from './connect-session.entity.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { redirectToCompletion } from './connect-completion-page.js';
import { ConnectStateStore, STATE_LIFETIME_MS, type ConnectRequest } from './connect-state.store.js';
import { ConnectCompletionService } from './connect-completion.service.js';
import { createCwsStrategy, strategyName, type OAuthResult, type PassportInstance } from './cws-oauth2.strategy.js';
import type { CreateConnectSessionDto } from './dto/connect-session.dto.js';
import { sha256 } from '../common/hash.js';

export const SESSION_LIFETIME_MS = 10 * 60_000;
const SESSION_SWEEP_MS = 15 * 60_000;

type PassportOutcome = { kind: 'redirected' } | { kind: 'success'; result: OAuthResult } | { kind: 'fail'; info: unknown };

/** The OAuth 2.0 authorization code flow (API.md section 5): connect sessions, the redirect, the callback. */
@Injectable()
export class ConnectService {
  private readonly passport: PassportInstance = new passport.Passport();
  private readonly stateStore: ConnectStateStore;
  private readonly logger = new Logger('ConnectService');

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly sessions: ConnectSessionsRepository,
    private readonly completion: ConnectCompletionService,
    private readonly tenants: TenantsService,
    private readonly upstream: UpstreamClient,
    private readonly clock: Clock,
    private readonly environments: Environments,
  ) {
    this.stateStore = new ConnectStateStore(sessions, clock, config.publicUrl);
    for (const env of environments.all()) {
      createCwsStrategy(env, { publicUrl: config.publicUrl, upstream, stateStore: this.stateStore, passport: this.passport });
    }
  }

  async createSession(tenantId: string, dto: CreateConnectSessionDto): Promise<{ connectUrl: string; expiresAt: Date }> {
    const tenant = await this.tenants.get(tenantId);
    const env = this.environments.get(tenant.environment);
    if (dto.kind === 'user' && !dto.userId) throw new AppError('validation_failed', 'userId is required for kind user.');
    if (dto.kind === 'admin' && dto.userId !== undefined)
      throw new AppError('validation_failed', 'userId must not be given for kind admin.');
    if (!tenant.allowedReturnUrls.some((allowed) => returnUrlAllowed(dto.returnUrl, allowed))) {
      throw new AppError('validation_failed', "returnUrl must start with one of the tenant's allowedReturnUrls.");
    }
    const scopes = dto.scopes ?? env.scopes;
    const outside = scopes.filter((s) => !env.scopes.includes(s));
    if (outside.length)
      throw new AppError('validation_failed', `These scopes are not registered for the environment: ${outside.join(', ')}.`);
    if (new Set(scopes).size !== scopes.length) throw new AppError('validation_failed', 'scopes must not repeat.');

    const token = randomBytes(32).toString('base64url');
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
    await this.sessions.insert(
      Object.assign(new ConnectSessionEntity(), {
        id: randomUUID(),
        tenantId,
        kind: dto.kind,
        userId: dto.kind === 'user' ? (dto.userId ?? null) : null,
        returnUrl: dto.returnUrl,
        scopes,
        tokenHash: sha256(token),
        stateHash: null,
        browserHash: null,
        expiresAt,
        startedAt: null,
        stateExpiresAt: null,
        completedAt: null,
        createdAt: now,
      }),
    );
    return { connectUrl: `${this.config.publicUrl}/connect/${token}`, expiresAt };
  }

  /**
   * Connect sessions are single use and short-lived; past their life (and their state's, which can start
   * at the last moment) they are clutter. Every instance sweeps; the DELETE is idempotent.
   */
  @Interval(SESSION_SWEEP_MS)
  async sweepExpiredSessions(): Promise<number> {
    try {
      return await this.sessions.deleteExpired(new Date(this.clock.now().getTime() - STATE_LIFETIME_MS));
    } catch (e) {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not sweep expired connect sessions');
      return 0;
    }
  }

  /** GET {connectUrl}: opens the session once and redirects to the upstream's authorize page. */
  async begin(token: string, req: Request, res: Response): Promise<void> {
    const tokenHash = sha256(token);
    const session = await this.sessions.findByTokenHash(tokenHash);
    if (!session) throw new AppError('connect_state_invalid', 'This connect link is not valid.');
    const popup = req.query.display === 'popup';
    if (session.startedAt || session.expiresAt <= this.clock.now()) {
      if (popup) return redirectToCompletion(res, session, { status: 'error', error: 'expired' });
      throw new AppError('connect_session_expired', 'This connect link has expired or was already used. Ask for a new one.');
    }
    if (popup) await this.sessions.markPopup(session.id);
    const tenant = await this.tenants.get(session.tenantId);
    const env = this.environments.get(tenant.environment);
    (req as ConnectRequest).connectTokenHash = tokenHash;
    const outcome = await this.runPassport(env, { session: false, scope: session.scopes }, req, res);
    if (outcome.kind !== 'redirected') throw new Error('the authorize step did not redirect');
  }

  /** GET /oauth/callback: consumes the state, exchanges the code, stores the connection, returns the browser. */
  async callback(req: Request, res: Response): Promise<void> {
    const state = req.query.state;
    if (typeof req.query.error === 'string') {
      const session = await this.stateStore.consume(req, state);
      return redirectBack(res, session, { status: 'error', error: oauthErrorCode(req.query.error) });
    }
    if (typeof req.query.code !== 'string' || !req.query.code) {
      await this.stateStore.consume(req, state);
      throw new AppError('validation_failed', 'The callback carries neither a code nor an error.');
    }
    const peeked = await this.stateStore.peek(state);
    if (!peeked) throw new AppError('connect_state_invalid', 'The OAuth state is unknown or was already used. Start the connection again.');
    const tenant = await this.tenants.get(peeked.tenantId);
    const env = this.environments.get(tenant.environment);

    let outcome: PassportOutcome;
    try {
      outcome = await this.runPassport(env, { session: false }, req, res);
    } catch (e) {
      const session = (req as ConnectRequest).connectSession;
      if (!session || e instanceof AppError) throw e;
      return redirectBack(res, session, { status: 'error', error: callbackErrorCode(e) });
    }
    if (outcome.kind === 'fail')
      throw outcome.info instanceof AppError ? outcome.info : new AppError('connect_state_invalid', 'The OAuth state is not valid.');
    if (outcome.kind !== 'success') throw new Error('the callback step redirected unexpectedly');

    const { tokens, user, session } = outcome.result;
    const isAdmin = session.kind === 'admin' ? await this.checkAdmin(env, tokens) : false;
    const connectionId = await this.completion.save(session, tokens, user, isAdmin, requestIdOf(req));
    if (session.kind === 'admin' && !isAdmin) return redirectBack(res, session, { status: 'error', error: 'not_admin', connectionId });
    return redirectBack(res, session, { status: 'connected', connectionId });
  }

  /** An admin connection must reach the admin-only webhook endpoints (spec section 1, rule 5). */
  private async checkAdmin(env: CwsEnvironment, tokens: TokenSet): Promise<boolean> {
    const res = await this.upstream.resource(env, {
      method: 'GET',
      path: '/webhooks',
      headers: { accept: 'application/json' },
      accessToken: tokens.accessToken,
      retry: true,
    });
    await res.body.dump();
    return res.status >= 200 && res.status < 300;
  }

  private runPassport(env: CwsEnvironment, options: Record<string, unknown>, req: Request, res: Response): Promise<PassportOutcome> {
    return new Promise((resolve, reject) => {
      res.once('finish', () => resolve({ kind: 'redirected' }));
      const next: NextFunction = (err?: unknown) => (err ? reject(err) : reject(new Error('passport passed the request on')));
      const handler = this.passport.authenticate(strategyName(env), options, (err: unknown, user: OAuthResult | false, info: unknown) => {
        if (err) return reject(err);
        resolve(user ? { kind: 'success', result: user } : { kind: 'fail', info });
      }) as (req: Request, res: Response, next: NextFunction) => void;
      handler(req, res, next);
    });
  }
}

/** A return URL is allowed when it has the same origin as an allowed one and its path starts with the allowed path. */
export function returnUrlAllowed(candidate: string, allowed: string): boolean {
  let c: URL;
  let a: URL;
  try {
    c = new URL(candidate);
    a = new URL(allowed);
  } catch {
    return false;
  }
  return c.origin === a.origin && c.pathname.startsWith(a.pathname) && candidate.startsWith(allowed);
}

function redirectBack(res: Response, session: ConnectSessionEntity, params: Record<string, string>): void {
  if (session.display === 'popup') return redirectToCompletion(res, session, params);
  const url = new URL(session.returnUrl);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  res.redirect(302, url.toString());
}

function oauthErrorCode(raw: string): string {
  return /^[a-z_]{1,64}$/.test(raw) ? raw : 'authorization_failed';
}

/** passport-oauth2 wraps a failed code exchange in an InternalOAuthError carrying the cause as oauthError. */
function callbackErrorCode(e: unknown): string {
  const cause = typeof e === 'object' && e !== null && 'oauthError' in e ? (e as { oauthError: unknown }).oauthError : e;
  if (cause instanceof TokenEndpointError) return 'token_exchange_failed';
  if (cause instanceof UpstreamStatusError) return 'userinfo_failed';
  // Unreachable or too slow: the browser is told the same (retry later).
  if (upstreamFailure(cause)) return 'upstream_unavailable';
  return 'connect_failed';
}
