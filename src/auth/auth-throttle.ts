import type { IncomingMessage } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import ipaddr from 'ipaddr.js';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';

/** Clients remembered at once per limiter; past it, expired windows are dropped, then the oldest. */
const MAX_CLIENTS = 10_000;

interface Window {
  start: number;
  failures: number;
}

/**
 * Failed credential checks counted per client (and, when `overall` is set, for all clients together) in fixed
 * windows of `windowMs`. A client past its bound is refused before its credential is even checked, until its
 * window ends. In memory, per instance (docs/security.md, "Credential guessing"): N instances allow N times the
 * bound, which still leaves guessing a 128-bit key hopeless.
 */
export class FailureLimiter {
  private readonly clients = new Map<string, Window>();
  private all: Window = { start: 0, failures: 0 };

  constructor(
    private readonly perClient: number,
    private readonly overall: number | null,
    private readonly windowMs: number,
    private readonly now: () => number,
  ) {}

  /** Seconds the client must wait before a credential of its is checked again; 0: go ahead. */
  blockedFor(client: string): number {
    const now = this.now();
    const own = this.clients.get(client);
    let until = 0;
    if (own && own.failures >= this.perClient && now - own.start < this.windowMs) until = own.start + this.windowMs;
    if (this.overall !== null && this.all.failures >= this.overall && now - this.all.start < this.windowMs)
      until = Math.max(until, this.all.start + this.windowMs);
    return until === 0 ? 0 : Math.max(1, Math.ceil((until - now) / 1000));
  }

  failed(client: string): void {
    const now = this.now();
    if (now - this.all.start >= this.windowMs) this.all = { start: now, failures: 0 };
    this.all.failures++;
    let own = this.clients.get(client);
    if (!own || now - own.start >= this.windowMs) {
      if (!own && this.clients.size >= MAX_CLIENTS) this.evict(now);
      own = { start: now, failures: 0 };
      this.clients.set(client, own);
    }
    own.failures++;
  }

  private evict(now: number): void {
    for (const [client, w] of this.clients) if (now - w.start >= this.windowMs) this.clients.delete(client);
    // Still full: the oldest go (a Map iterates in insertion order).
    for (const client of this.clients.keys()) {
      if (this.clients.size < MAX_CLIENTS) break;
      this.clients.delete(client);
    }
  }
}

/** The limiters of failed credentials: console sign-ins (per client and overall) and API keys (per client). */
@Injectable()
export class AuthThrottle {
  readonly signIn: FailureLimiter;
  readonly apiKeys: FailureLimiter;

  constructor(@Inject(APP_CONFIG) config: AppConfig, clock: Clock) {
    const { signInMaxFailuresPerClient, signInMaxFailures, apiKeyMaxFailuresPerClient, authFailureWindowMs } = config.security;
    const now = () => clock.now().getTime();
    this.signIn = new FailureLimiter(signInMaxFailuresPerClient, signInMaxFailures, authFailureWindowMs, now);
    this.apiKeys = new FailureLimiter(apiKeyMaxFailuresPerClient, null, authFailureWindowMs, now);
  }
}

/**
 * Runs a credential check for `client` under `limiter`: refused with `429 too_many_requests` and Retry-After
 * while the client is past its bound; a `401`/`403` it gives is counted. Other outcomes (an unknown tenant,
 * a database outage) are not the caller's guess and are not counted.
 */
export async function throttled<T>(limiter: FailureLimiter, client: string, check: () => Promise<T>): Promise<T> {
  const wait = limiter.blockedFor(client);
  if (wait > 0) {
    throw new AppError(
      'too_many_requests',
      'Too many failed credentials from this client: retry after the time in Retry-After.',
      undefined,
      wait,
    );
  }
  try {
    return await check();
  } catch (e) {
    if (e instanceof AppError && (e.code === 'unauthorized' || e.code === 'forbidden')) limiter.failed(client);
    throw e;
  }
}

/**
 * Who is asking, as the limiters count it: the socket's address, or, behind a proxy on this host (loopback,
 * as Express's `trust proxy` is set), the nearest address in X-Forwarded-For that is not loopback. An IPv6
 * client is its /64 (one host usually holds a whole /64, so single addresses would be free to rotate).
 */
export function clientOf(req: IncomingMessage): string {
  let address = req.socket.remoteAddress ?? '';
  if (isLoopback(address)) {
    const forwarded = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? '')).split(',').map((s) => s.trim());
    for (let i = hops.length - 1; i >= 0; i--) {
      if (!hops[i]) continue;
      address = hops[i];
      if (!isLoopback(address)) break;
    }
  }
  if (!ipaddr.isValid(address)) return address;
  const ip = ipaddr.process(address);
  return ip.kind() === 'ipv6'
    ? `${(ip as ipaddr.IPv6).parts
        .slice(0, 4)
        .map((p) => p.toString(16))
        .join(':')}::/64`
    : ip.toString();
}

function isLoopback(address: string): boolean {
  return ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';
}
