// Every type the sandbox shares between its files and with its users, in one place (no imports).

/** Milliseconds since the epoch; injected so that expiry rules can be tested without sleeping. */
export type Clock = () => number;

export interface SandboxUserSeed {
  id: string;
  email: string;
  username: string;
  name: string;
  isAdmin: boolean;
}

export interface SandboxOptions {
  host?: string;
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** Registered redirect URIs; an authorization request must use one of them exactly (string equality). */
  redirectUris: string[];
  /** Registered scopes, dotted names. */
  scopes?: string[];
  accessTokenTtlSeconds?: number;
  codeTtlSeconds?: number;
  users?: SandboxUserSeed[];
  /** Ring buffer size of the call record; 0 disables recording (counters are still kept). */
  recordLimit?: number;
  webhookDeliveryRetries?: number;
  /** Name of the client application shown on the consent page (default 'cws-connect'). */
  clientName?: string;
  /** Start with a few demo workflows (default false; the standalone sandbox turns it on). */
  seedWorkflows?: boolean;
  /** Time source in ms (default Date.now): lets tests expire codes and tokens without sleeping. */
  clock?: Clock;
  /** Rate limits applied to every company (default none); per company through setQuotas or POST /_sandbox/quotas. */
  quotas?: SandboxQuotas;
  /** Paging of GET /workflows (default none: one `{"workflows": [...]}` answer); later through setListing or POST /_sandbox/listing. */
  listing?: SandboxListing;
}

/**
 * Paging of GET /workflows. `pageSize` null: not paged (`{"workflows": [...]}`, as without this control);
 * otherwise a top-level JSON array of at most `pageSize` workflows and a `Link: <...>; rel="next"` while more remain.
 */
export interface SandboxListing {
  pageSize: number | null;
  /** The `page`-th page (1 = the first) of any listing walk answers `status`, `times` times, then normally again. */
  fail?: SandboxListingFailure | null;
}

export interface SandboxListingFailure {
  page: number;
  status: number;
  /** Answers still to fail (when read back: what remains). */
  times: number;
}

/** At most `calls` resource calls per window of `windowSeconds`, windows aligned to the Unix epoch. */
export interface SandboxQuota {
  calls: number;
  windowSeconds: number;
  /** `sliding` (the default): any interval of `windowSeconds`; `clock`: windows aligned to the Unix epoch. */
  counting?: 'sliding' | 'clock';
}

/** A company's limits per class: `read` = GET and HEAD resource calls, `write` = the others. */
export interface SandboxQuotas {
  read?: SandboxQuota;
  write?: SandboxQuota;
}

export interface SandboxCallRecord {
  at: number;
  method: string;
  path: string;
  /** Raw query string, with credential-like parameter values (code, tokens, secrets) redacted. */
  query: string;
  contentType: string | null;
  clientAuth: 'body' | 'basic-header' | null;
  bodyFormat: 'json' | 'form' | 'multipart' | 'other' | 'none';
  grantType?: string;
  tokenUserId?: string;
  tokenFamily?: string;
  /** Names of the request headers received (lower case, no values): shows what a proxy forwarded. */
  headerNames: string[];
  /** 0 while unanswered, or when the connection was dropped without an answer (fault 'down'). */
  status: number;
  outcome?: string;
}

/** The refresh_token grant calls that presented a token of one grant family: granted, and refused (reuse, revoked, scope). */
export interface SandboxRefreshCalls {
  family: string;
  granted: number;
  refused: number;
}

export interface SandboxStats {
  tokenRequests: number;
  codeExchanges: number;
  refreshes: number;
  refreshReuses: number;
  expiredTokenCalls: number;
  unknownTokenCalls: number;
  resourceCalls: number;
  /** Resource calls answered 429 because their company's limit was spent (option quotas). */
  quotaRefusals: number;
  /** Webhook deliveries dropped on purpose (POST /_sandbox/webhooks/drop): never sent. */
  deliveriesDropped: number;
}

export interface SandboxFaultLimits {
  /** Path prefixes the fault applies to (default: every path outside /_sandbox/). */
  paths?: string[];
  /** Apply to the next N matching requests only, then clear (default: until cleared). */
  count?: number;
}

export type SandboxFault =
  | ({ mode: 'down' } & SandboxFaultLimits)
  | ({ mode: 'status'; status: number; retryAfterSeconds?: number } & SandboxFaultLimits)
  | ({ mode: 'slow'; delayMs: number } & SandboxFaultLimits);

/** What the sandbox remembers of a delivery (without header values: they may hold credentials). */
export interface SandboxDelivery {
  readonly id: string;
  readonly webhookId: string;
  readonly event: string;
  readonly workflowId: string;
  readonly targetURL: string;
  attempts: number;
  /** `dropped`: lost on purpose (POST /_sandbox/webhooks/drop), never sent (attempts 0). */
  state: 'pending' | 'delivered' | 'failed' | 'dropped';
  lastStatus: number | null;
  lastError: string | null;
}

/** SandboxOptions with defaults applied and checked. */
export interface SandboxConfig {
  readonly host: string;
  readonly port: number;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly clientName: string;
  readonly redirectUris: ReadonlySet<string>;
  readonly scopes: readonly string[];
  readonly scopeSet: ReadonlySet<string>;
  readonly accessTokenTtlSeconds: number;
  readonly codeTtlSeconds: number;
  readonly users: readonly SandboxUserSeed[];
  readonly recordLimit: number;
  readonly webhookDeliveryRetries: number;
  readonly seedWorkflows: boolean;
  readonly clock: Clock;
  readonly quotas: SandboxQuotas;
  readonly listing: SandboxListing;
}
