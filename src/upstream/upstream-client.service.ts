import { backoffMs } from '../common/backoff.js';
import { Inject, Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import type { AppConfig } from '../config/app-config.js';
import type { CwsEnvironment } from '../config/environment-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { endClientSpan, injectTraceContext, startClientSpan } from '../telemetry/client-spans.js';
import { tracingOn } from '../telemetry/tracing.js';
import { type SmallResponse, postSmall } from './small-request.js';
import { dispatchStreamed, type Outcome, type StreamedResponse } from './streamed-request.js';
import { oauthErrorOf, parseTokenSet, parseUser, retryAfterOf } from './upstream-answers.js';
import { UpstreamMetrics } from './upstream-metrics.js';
import { TokenEndpointError, UpstreamStatusError, UpstreamTimeoutError, UpstreamUnavailableError } from './upstream.errors.js';
import type { ResourceRequest, ResourceResponse, TokenSet, UpstreamUser } from './upstream.types.js';

const RETRYABLE_STATUS = new Set([502, 503, 504]);

/**
 * The one HTTP client to the CWS (undici, keep-alive). Token calls send their parameters as JSON
 * (spec 4.1) with the client credentials in the body or, per environment, in a Basic header.
 */
@Injectable()
export class UpstreamClient implements OnModuleDestroy {
  private readonly agent: Agent;
  /**
   * The scheduler's token calls have sockets of their own, as many per origin as it keeps calls in flight
   * (REFRESH_CONCURRENCY); more wait for a free one. On the shared pool (256), undici opened a new connection
   * whenever the next call was dispatched in the same tick as its predecessor's answer ended: 128 connections
   * for 64 calls, and the upstream paid for the extra sockets on every call (bench/refresh.ts). Interactive
   * token calls (a code exchange, an on-demand or forced renewal) stay on the shared pool, never queued behind
   * the scheduler.
   */
  private readonly backgroundTokenAgent: Agent;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Optional() private readonly metrics?: UpstreamMetrics,
  ) {
    const common = {
      connectTimeout: config.upstream.connectTimeoutMs,
      headersTimeout: config.upstream.headersTimeoutMs,
      bodyTimeout: config.upstream.bodyTimeoutMs,
      keepAliveTimeout: 10_000,
      pipelining: 1,
    };
    this.agent = new Agent({ ...common, connections: 256 });
    this.backgroundTokenAgent = new Agent({ ...common, connections: config.refresh.concurrency });
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([this.agent.close(), this.backgroundTokenAgent.close()]);
  }

  exchangeCode(env: CwsEnvironment, code: string, redirectUri: string): Promise<TokenSet> {
    const grant = { grant_type: 'authorization_code', code, redirect_uri: redirectUri };
    const body = env.tokenAuth === 'header' ? grant : { ...grant, client_id: env.clientId, client_secret: env.clientSecret };
    return this.token(env, body, true, this.agent);
  }

  /** `background`: a scheduled renewal, sent on the scheduler's own pool of sockets. */
  refresh(env: CwsEnvironment, refreshToken: string, options: { scope?: string[]; background?: boolean } = {}): Promise<TokenSet> {
    // One literal per auth mode: adding the credentials to a spread copy cost more than the JSON encoding itself.
    const body: Record<string, string> =
      env.tokenAuth === 'header'
        ? { grant_type: 'refresh_token', refresh_token: refreshToken }
        : { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: env.clientId, client_secret: env.clientSecret };
    if (options.scope?.length) body.scope = options.scope.join(' ');
    return this.token(env, body, false, options.background ? this.backgroundTokenAgent : this.agent);
  }

  async userinfo(env: CwsEnvironment, accessToken: string): Promise<UpstreamUser> {
    const res = await this.resource(env, {
      method: env.userinfoMethod,
      path: '/userinfo',
      headers: { accept: 'application/json' },
      accessToken,
      retry: env.userinfoMethod === 'GET',
    });
    const text = await res.body.text();
    if (res.status !== 200) throw new UpstreamStatusError(res.status, '/userinfo');
    return parseUser(text);
  }

  /** A resource call, streamed both ways. GETs (or calls marked retry) are retried on connection errors and 502/503/504. */
  resource(env: CwsEnvironment, req: ResourceRequest): Promise<ResourceResponse> {
    return new Promise((resolve, reject) => this.resourceTo(env, req, { answer: resolve, fail: reject }));
  }

  /**
   * `resource`, its answer (status and headers; the body follows) or its failure handed to `outcome`: no promise
   * on the way when nothing is retried (the facade's proxied calls). `outcome.answer` must not throw.
   */
  resourceTo(env: CwsEnvironment, req: ResourceRequest, outcome: Outcome<ResourceResponse>): void {
    const started = performance.now();
    const record = (status: number | null) => this.metrics?.record(status, (performance.now() - started) / 1000);
    let options: Dispatcher.DispatchOptions;
    let retries: number;
    let span: ReturnType<typeof startClientSpan>;
    try {
      // The request path and query go out exactly as given (a URL object would re-encode them); only the base is parsed.
      const base = apiBaseOf(env.apiUrl);
      retries = req.retry ? this.config.upstream.retries : 0;
      const headers: Record<string, string | string[]> = { ...req.headers, authorization: `Bearer ${req.accessToken}` };
      // Ends when the answer's body does: the span covers the whole exchange, streamed or not.
      span = tracingOn()
        ? startClientSpan(`${req.method} upstream`, req.method, base.origin + base.prefix + req.path, req.trace ?? null)
        : null;
      if (span !== null) {
        span.setAttribute('cws.environment', env.name);
        injectTraceContext(span, headers);
      }
      options = {
        origin: base.origin,
        path: base.prefix + req.path,
        method: req.method as Dispatcher.HttpMethod,
        headers,
        body: req.body ?? null,
      };
    } catch (e) {
      record(null);
      outcome.fail(e);
      return;
    }
    let attempt = 0;
    const again = () => {
      attempt++;
      dispatchStreamed(this.agent, options, req.signal, handler);
    };
    const handler: Outcome<StreamedResponse> = {
      answer: (res) => {
        if (attempt < retries && RETRYABLE_STATUS.has(res.statusCode)) {
          const wait = backoffMs(attempt, BACKOFF);
          void res.body.dump().then(() => setTimeout(again, wait));
          return;
        }
        if (span !== null) {
          if (attempt > 0) span.setAttribute('http.request.resend_count', attempt);
          res.body.once('close', () => endClientSpan(span, res.statusCode));
        }
        record(res.statusCode);
        outcome.answer({ status: res.statusCode, headers: res.headers, body: res.body });
      },
      fail: (e) => {
        const mapped = mapError(e);
        if (attempt < retries && mapped instanceof UpstreamUnavailableError) {
          setTimeout(again, backoffMs(attempt, BACKOFF));
          return;
        }
        endClientSpan(span, null, mapped);
        record(null);
        outcome.fail(mapped);
      },
    };
    dispatchStreamed(this.agent, options, req.signal, handler);
  }

  /** `body`: the grant's parameters, with the client credentials in it unless the environment sends them in a Basic header. */
  private async token(env: CwsEnvironment, body: Record<string, string>, withScope: boolean, agent: Agent): Promise<TokenSet> {
    const url = tokenUrlOf(env.authUrl);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (env.tokenAuth === 'header')
      headers.authorization = `Basic ${Buffer.from(`${env.clientId}:${env.clientSecret}`).toString('base64')}`;
    const span = tracingOn() ? startClientSpan('POST oauth token', 'POST', url.origin + url.pathname, null) : null;
    if (span !== null) {
      span.setAttributes({ 'cws.environment': env.name, 'cws.grant_type': body.grant_type });
      injectTraceContext(span, headers);
    }
    let res: SmallResponse;
    try {
      res = await postSmall(agent, {
        origin: url.origin,
        path: url.pathname,
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        headersTimeout: this.config.upstream.tokenTimeoutMs,
        bodyTimeout: this.config.upstream.tokenTimeoutMs,
      });
    } catch (e) {
      const mapped = mapError(e);
      endClientSpan(span, null, mapped);
      throw mapped;
    }
    endClientSpan(span, res.status);
    const text = res.body;
    if (res.status !== 200) {
      throw new TokenEndpointError(res.status, oauthErrorOf(text), retryAfterOf(res.headers['retry-after']));
    }
    return parseTokenSet(text, withScope);
  }
}

function mapError(e: unknown): Error {
  if (e instanceof TokenEndpointError || e instanceof UpstreamStatusError) return e;
  if (e instanceof undiciErrors.HeadersTimeoutError || e instanceof undiciErrors.BodyTimeoutError) {
    return new UpstreamTimeoutError('the upstream did not answer in time');
  }
  if (e instanceof Error && e.name === 'AbortError') return e;
  return new UpstreamUnavailableError(
    `the upstream could not be reached: ${e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.name) : 'unknown error'}`,
    e,
  );
}

const tokenUrls = new Map<string, { origin: string; pathname: string }>();

/** Origin and path of an environment's token endpoint, parsed once (the scheduler calls it thousands of times a second). */
function tokenUrlOf(authUrl: string): { origin: string; pathname: string } {
  let url = tokenUrls.get(authUrl);
  if (!url) {
    const parsed = new URL(`${authUrl}/oauth/token`);
    url = { origin: parsed.origin, pathname: parsed.pathname };
    tokenUrls.set(authUrl, url);
  }
  return url;
}

const apiBases = new Map<string, { origin: string; prefix: string }>();

/** Origin and path prefix of an environment's API URL, parsed once. */
function apiBaseOf(apiUrl: string): { origin: string; prefix: string } {
  let base = apiBases.get(apiUrl);
  if (!base) {
    const url = new URL(apiUrl);
    base = { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
    apiBases.set(apiUrl, base);
  }
  return base;
}

/** Between two attempts of a resource call. */
const BACKOFF = { baseMs: 100, capMs: 2000 };
