import { performance } from 'node:perf_hooks';
import { Logger } from '@nestjs/common';
import { Agent, request } from 'undici';
import type { Clock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import { endClientSpan, injectTraceContext, startClientSpan } from '../telemetry/client-spans.js';
import { contextOf } from '../telemetry/operation-spans.js';
import { ATTR } from '../telemetry/tracing.js';
import type { StoredEvent } from './events.repository.js';
import { signDelivery } from './standard-webhooks.js';
import { guardedConnector, TargetRefusedError, targetPolicy } from '../common/target-policy.js';

/** One attempt's result: what the attempts log keeps, and the Retry-After the target asked for (429, 503). */
export interface AttemptOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  retryAfterMs: number | null;
}

/**
 * The HTTP client to the tenants' events targets: one signed POST of an event per attempt (Standard Webhooks,
 * every current events secret), in the trace that received or created it, every connection checked against
 * the target policy. What comes back is only what the attempts log may keep: never a body, a header or a URL.
 */
export class EventTargetClient {
  private readonly logger = new Logger('EventDelivery');
  private readonly agent: Agent;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {
    this.agent = new Agent({
      // Every connection is checked against the target policy as it is made: the address it resolves to then.
      connect: guardedConnector(
        targetPolicy(config.production, config.security.eventsTargetAllowPrivate),
        Math.min(10_000, config.events.attemptTimeoutMs),
      ),
      headersTimeout: config.events.attemptTimeoutMs,
      bodyTimeout: config.events.attemptTimeoutMs,
      keepAliveTimeout: 10_000,
      connections: 64,
    });
  }

  /** Closes the sockets; `cut`: attempts still running are cut rather than waited for. */
  async close(cut: boolean): Promise<void> {
    await (cut ? this.agent.destroy() : this.agent.close());
  }

  /**
   * One attempt: the event POSTed to `target`, signed with each of `secrets`, as `webhookId` (the event's id for
   * eventsTargetUrl; one per event and endpoint for an added endpoint, docs/endpoints.md). Never throws.
   */
  async post(target: string, secrets: string[], event: StoredEvent, webhookId: string = event.id): Promise<AttemptOutcome> {
    const body = deliveryBody(event);
    const timestamp = Math.floor(this.clock.now().getTime() / 1000);
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'cws-connect-webhooks/1',
      ...signDelivery(secrets, webhookId, timestamp, body),
      ...(event.payloadDigest !== null ? { 'cws-payload-digest': event.payloadDigest } : {}),
    };
    // In the trace that received or created the event, so the partner can join its own to it.
    const span = startClientSpan(
      'POST event delivery',
      'POST',
      originOf(target),
      { [ATTR.tenant]: event.tenantId, [ATTR.eventId]: event.id, [ATTR.eventType]: event.type },
      contextOf(event.traceparent),
    );
    if (span !== null) injectTraceContext(span, headers);
    else if (event.traceparent !== null) headers.traceparent = event.traceparent;
    try {
      const res = await request(target, {
        method: 'POST',
        dispatcher: this.agent,
        headers,
        body,
        signal: AbortSignal.timeout(this.config.events.attemptTimeoutMs),
      });
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const status = res.statusCode;
      endClientSpan(span, status);
      if (status >= 200 && status < 300) return { ok: true, status, error: null, durationMs: took(), retryAfterMs: null };
      const retryAfterMs =
        status === 429 || status === 503
          ? retryAfterMsOf(res.headers['retry-after'], this.clock.now().getTime(), this.config.events.retrySpanMs)
          : null;
      return { ok: false, status, error: `http_${status}`, durationMs: took(), retryAfterMs };
    } catch (e) {
      endClientSpan(span, null, e);
      // Recorded as any failed connect (`network`): the attempts log must not tell internal addresses apart.
      if (refusedByPolicy(e))
        this.logger.warn({ eventId: event.id, tenantId: event.tenantId }, 'the events target resolves to an address that is not allowed');
      return { ok: false, status: null, error: networkError(e), durationMs: took(), retryAfterMs: null };
    }
  }
}

/** The delivered body: `{type, timestamp, data}`, `timestamp` being when cws-connect recorded the event. */
export function deliveryBody(event: Pick<StoredEvent, 'type' | 'receivedAt' | 'payload'>): string {
  return JSON.stringify({ type: event.type, timestamp: event.receivedAt.toISOString(), data: event.payload });
}

/**
 * A Retry-After header (delay-seconds or an HTTP date) in milliseconds from `now`, at most `capMs`; null when
 * absent or unreadable.
 */
export function retryAfterMsOf(header: string | string[] | undefined, now: number, capMs: number): number | null {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return null;
  let ms: number;
  if (/^\d{1,10}$/.test(value)) ms = Number(value) * 1000;
  else {
    // An HTTP date starts with a day name (IMF-fixdate, RFC 850 or asctime); Date.parse alone takes "-5" for a year.
    const at = /^[A-Za-z]{3,9},? /.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.min(capMs, Math.max(0, ms));
}

/** A target URL's origin: its path and query may hold the partner's own secret (a token in a webhook URL is common). */
function originOf(target: string): string {
  try {
    return new URL(target).origin;
  } catch {
    return '';
  }
}

// Only the error's kind: a message may quote the target URL, which can carry credentials.
function networkError(e: unknown): string {
  const err = e as { code?: unknown; name?: unknown; cause?: { code?: unknown; name?: unknown } };
  const code = typeof err?.code === 'string' ? err.code : typeof err?.cause?.code === 'string' ? err.cause.code : '';
  const timedOut =
    ['TimeoutError', 'AbortError'].includes(String(err?.name)) || String(err?.cause?.name) === 'TimeoutError' || /TIMEOUT/.test(code);
  return timedOut ? 'timeout' : 'network';
}

function refusedByPolicy(e: unknown): boolean {
  for (let err = e, depth = 0; err instanceof Error && depth < 4; err = err.cause, depth++)
    if (err instanceof TargetRefusedError) return true;
  return false;
}
