import type { TrustProxy } from './value-formats.js';
import type { Values } from './variable.js';
import type { SERVICE_VARIABLES } from './variables.js';

/** The variables of docs/security.md's bounds that are not the HTTP server's timeouts. */
export interface SecurityConfig {
  /** EVENTS_TARGET_ALLOW_PRIVATE: addresses, CIDR ranges and host names event deliveries may reach although internal. */
  eventsTargetAllowPrivate: string[];
  /** Failed console sign-ins per client, and from all clients together, per window (429 past them). */
  signInMaxFailuresPerClient: number;
  signInMaxFailures: number;
  /** Failed API keys (and console sessions) per client per window on /v1. */
  apiKeyMaxFailuresPerClient: number;
  authFailureWindowMs: number;
  /** TRUST_PROXY: the sockets whose X-Forwarded-For names the client (auth/client-address.ts). */
  trustProxy: TrustProxy;
  /** METRICS_TOKEN: the bearer /metrics asks for; null: none. */
  metricsToken: string | null;
  /** METRICS_PORT: /metrics on a server of its own (and not on PORT); null: none. METRICS_HOST: its address. */
  metricsPort: number | null;
  metricsHost: string;
}

export function securityConfig(v: Values<typeof SERVICE_VARIABLES>): SecurityConfig {
  return {
    signInMaxFailuresPerClient: v.SIGN_IN_MAX_FAILURES_PER_CLIENT,
    signInMaxFailures: v.SIGN_IN_MAX_FAILURES,
    apiKeyMaxFailuresPerClient: v.API_KEY_MAX_FAILURES_PER_CLIENT,
    authFailureWindowMs: v.AUTH_FAILURE_WINDOW_MS,
    trustProxy: v.TRUST_PROXY,
    metricsToken: v.METRICS_TOKEN ?? null,
    metricsPort: v.METRICS_PORT ?? null,
    metricsHost: v.METRICS_HOST,
    eventsTargetAllowPrivate: v.EVENTS_TARGET_ALLOW_PRIVATE,
  };
}
