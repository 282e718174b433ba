import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import type { PassportStatic } from 'passport';
import type { oauth2tokenCallback } from 'oauth';
import { Strategy as OAuth2Strategy, type StateStore, type StrategyOptionsWithRequest } from 'passport-oauth2';
import type { CwsEnvironment } from '../config/environment-config.js';
import type { UpstreamClient } from '../upstream/upstream-client.service.js';
import type { TokenSet, UpstreamUser } from '../upstream/upstream.types.js';
import type { ConnectRequest, ConnectStateStore } from './connect-state.store.js';
import type { ConnectSessionEntity } from './connect-session.entity.js';

export interface OAuthResult {
  tokens: TokenSet;
  user: UpstreamUser;
  session: ConnectSessionEntity;
}

export type PassportInstance = InstanceType<PassportStatic['Passport']>;

export function strategyName(env: CwsEnvironment): string {
  return `cws-${env.name}`;
}

/**
 * One passport-oauth2 strategy per configured environment, registered on the app's own Passport
 * instance (not the process-wide one, so that several apps in one process never share strategies).
 *
 * passport-oauth2 sends the token request form-encoded only; the spec describes a JSON body, so the
 * code exchange is handed to the UpstreamClient (JSON, client credentials in the body or a Basic
 * header per environment). /userinfo is read the same way. This file is the only such override.
 */
export function createCwsStrategy(
  env: CwsEnvironment,
  deps: { publicUrl: string; upstream: UpstreamClient; stateStore: ConnectStateStore; passport: PassportInstance },
): OAuth2Strategy {
  class CwsOAuth2Strategy extends PassportStrategy(OAuth2Strategy, strategyName(env), 6) {
    constructor() {
      const options: StrategyOptionsWithRequest = {
        authorizationURL: `${env.authUrl}/oauth/authorize`,
        tokenURL: `${env.authUrl}/oauth/token`,
        clientID: env.clientId,
        clientSecret: env.clientSecret,
        callbackURL: `${deps.publicUrl}/oauth/callback`,
        scopeSeparator: ' ',
        store: deps.stateStore as unknown as StateStore,
        passReqToCallback: true,
      };
      super(options);
      const callbackUrl = `${deps.publicUrl}/oauth/callback`;
      this._oauth2.getOAuthAccessToken = (
        code: string,
        params: Record<string, string> | oauth2tokenCallback,
        maybeCallback?: oauth2tokenCallback,
      ) => {
        const callback = typeof params === 'function' ? params : maybeCallback;
        const redirectUri = typeof params === 'function' ? callbackUrl : (params.redirect_uri ?? callbackUrl);
        if (!callback) throw new Error('getOAuthAccessToken needs a callback');
        deps.upstream.exchangeCode(env, code, redirectUri).then(
          (tokens) => callback(null as unknown as Error, tokens.accessToken, tokens.refreshToken, tokens),
          (e: unknown) => callback(e instanceof Error ? e : new Error(String(e)), '', '', {}),
        );
      };
    }

    getPassportInstance(): PassportInstance {
      return deps.passport;
    }

    override userProfile(accessToken: string, done: (err?: unknown, profile?: UpstreamUser) => void): void {
      deps.upstream.userinfo(env, accessToken).then(
        (user) => done(null, user),
        (e: unknown) => done(e),
      );
    }

    validate(req: Request, _accessToken: string, _refreshToken: string, tokens: TokenSet, user: UpstreamUser): OAuthResult {
      const session = (req as ConnectRequest).connectSession;
      if (!session) throw new Error('connect session missing after state verification');
      return { tokens, user, session };
    }
  }
  return new CwsOAuth2Strategy();
}
