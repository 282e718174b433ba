/** The service's own API, called from the page with the session cookie and its CSRF token. */

export interface Tenant {
  id: string;
  name: string;
  environment: string;
  design: string;
  allowedReturnUrls: string[];
  eventsTargetUrl: string | null;
  eventsTargetDisabled?: boolean;
  /** Days its events and their attempts are kept (its own window, else EVENT_RETENTION_DAYS). */
  eventRetentionDays: number;
  /** Its own upstream budgets per class; null: its environment's (docs/quotas.md). */
  quotas?: { read?: string; write?: string } | null;
  createdAt: string;
}

export interface Connection {
  id: string;
  kind: 'user' | 'admin';
  userId: string | null;
  upstreamUser: { id: string; email: string | null };
  isAdmin: boolean;
  status: 'active' | 'reauth_required';
  statusReason: string | null;
  scopes: string[];
  accessTokenExpiresAt: string | null;
  lastRefreshedAt: string | null;
  lastError: { code: string; at: string } | null;
  createdAt: string;
}

export interface ConnectionPage {
  connections: Connection[];
  next: string | null;
}

export interface Renewal {
  at: string;
  outcome: 'renewed' | 'failed' | 'reauth_required';
  error: string | null;
  durationMs: number;
}

export interface EventItem {
  id: string;
  receivedAt: string;
  type: string;
  source: string;
  delivery: {
    state: 'pending' | 'delivered' | 'dead' | 'no_target' | 'filtered';
    attempts: number;
    lastError: string | null;
    deliveredAt: string | null;
  };
}

export interface EventPage {
  events: EventItem[];
  next: string | null;
}

export interface Attempt {
  at: string;
  status: number | null;
  durationMs: number;
  error: string | null;
}

export interface AuditItem {
  id: string;
  at: string;
  actor: { kind: 'operator' | 'tenant_key' | 'console' | 'connect_session' | 'agent_session' | 'service'; id: string | null };
  action: string;
  tenantId: string | null;
  target: string | null;
  userId: string | null;
  requestId: string | null;
  outcome: 'success' | 'failure';
  count: number;
}

/** An event endpoint (API.md section 13): never its secret. */
export interface Endpoint {
  id: string;
  url: string;
  description: string | null;
  eventTypes: string[] | null;
  disabled: boolean;
  health: {
    state: 'healthy' | 'failing' | 'disabled';
    failingSince?: string;
    disabledReason?: 'request' | 'failing' | 'gone';
    successRate24h: number | null;
    pending: number;
    oldestPendingSeconds: number;
  };
}

/** One user's synced copy (API.md section 12, docs/records.md): figures and state only, never a record. */
export interface SyncState {
  userId: string;
  connectionId: string;
  state: 'initial' | 'ready' | 'failing' | 'paused';
  records: number;
  lastListedAt: string | null;
  lastChangeAt: string | null;
  nextListAt: string;
  lagSeconds: number;
  lastError?: string;
  failingSince: string | null;
}

export interface SyncPage {
  items: SyncState[];
  next: string | null;
}

export interface AgentSession {
  id: string;
  userId: string;
  tools: string[];
  label: string | null;
  status: 'active' | 'expired' | 'revoked';
  createdAt: string;
  expiresAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface AgentSessionPage {
  items: AgentSession[];
  next: string | null;
}

export interface AuditPage {
  items: AuditItem[];
  next: string | null;
}

export interface Figures {
  instanceId: string;
  startedAt: string;
  renewals: { byOutcome: Record<string, number>; meanMs: number | null; p95UnderMs: number | null; overdueSeconds: number };
  upstream: { byOutcome: Record<string, number>; meanMs: number | null; p95UnderMs: number | null };
  quotas: Record<'read' | 'write', { spent: number; waited: number; refused: number; upstream429: number }>;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The service's base path: the page lives at <base>/console/. */
const BASE = window.location.pathname.replace(/\/console\/?(index\.html)?$/, '');

let csrfToken: string | null = null;
let onSignedOut: () => void = () => undefined;

export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (csrfToken) headers['x-csrf-token'] = csrfToken;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(BASE + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
  });
  if (res.status === 204) return undefined as T;
  const json: unknown = await res.json().catch(() => null);
  if (!res.ok) {
    const error = (json as { error?: { code?: string; message?: string } } | null)?.error;
    if (res.status === 401 && path.startsWith('/v1/')) {
      csrfToken = null;
      onSignedOut();
    }
    throw new ApiError(res.status, error?.code ?? `http_${res.status}`, error?.message ?? `The service answered ${res.status}.`);
  }
  return json as T;
}

const enc = encodeURIComponent;

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Tenants per page of the console's tenants list: the service is never asked for all of them at once. */
export const TENANTS_PAGE = 100;

export const api = {
  async resume(): Promise<boolean> {
    try {
      csrfToken = (await call<{ csrfToken: string }>('GET', '/console/api/session')).csrfToken;
      return true;
    } catch {
      return false;
    }
  },
  async signIn(operatorKey: string): Promise<void> {
    csrfToken = (await call<{ csrfToken: string }>('POST', '/console/api/session', { operatorKey })).csrfToken;
  },
  async signOut(): Promise<void> {
    await call<void>('DELETE', '/console/api/session');
    csrfToken = null;
  },
  figures: () => call<Figures>('GET', '/console/api/figures'),
  /** One page of tenants (at most TENANTS_PAGE), after the tenant `after`. */
  tenants: (after?: string) => call<Tenant[]>('GET', `/v1/tenants${query({ limit: String(TENANTS_PAGE), after })}`),
  tenant: (t: string) => call<Tenant>('GET', `/v1/tenants/${enc(t)}`),
  connections: (t: string, filter: Record<string, string | undefined>) =>
    call<ConnectionPage>('GET', `/v1/tenants/${enc(t)}/connections${query(filter)}`),
  connection: (t: string, id: string) => call<Connection>('GET', `/v1/tenants/${enc(t)}/connections/${enc(id)}`),
  renewals: (t: string, id: string) => call<{ renewals: Renewal[] }>('GET', `/v1/tenants/${enc(t)}/connections/${enc(id)}/renewals`),
  renew: (t: string, id: string) => call<Connection>('POST', `/v1/tenants/${enc(t)}/connections/${enc(id)}/refresh`),
  deleteConnection: (t: string, id: string) => call<void>('DELETE', `/v1/tenants/${enc(t)}/connections/${enc(id)}`),
  events: (t: string, after: string | undefined, limit = 50) =>
    call<EventPage>('GET', `/v1/tenants/${enc(t)}/events${query({ after, limit: String(limit) })}`),
  attempts: (t: string, id: string) => call<{ attempts: Attempt[] }>('GET', `/v1/tenants/${enc(t)}/events/${enc(id)}/attempts`),
  redeliver: (t: string, id: string) => call<{ id: string }>('POST', `/v1/tenants/${enc(t)}/events/${enc(id)}/redeliver`),
  redeliverSince: (t: string, since: string, state: 'dead' | 'delivered' | 'any') =>
    call<{ queued: number }>('POST', `/v1/tenants/${enc(t)}/events/redeliver`, { since, state }),
  syncStates: (t: string, filter: Record<string, string | undefined>) =>
    call<SyncPage>('GET', `/v1/tenants/${enc(t)}/sync${query(filter)}`),
  endpoints: (t: string) => call<{ endpoints: Endpoint[] }>('GET', `/v1/tenants/${enc(t)}/endpoints`),
  agentSessions: (t: string, filter: Record<string, string | undefined>) =>
    call<AgentSessionPage>('GET', `/v1/tenants/${enc(t)}/agent-sessions${query(filter)}`),
  revokeAgentSession: (t: string, id: string) => call<void>('DELETE', `/v1/tenants/${enc(t)}/agent-sessions/${enc(id)}`),
  /** One page of the audit trail, newest first: a tenant's own rows, or every row (optionally one tenant's, deleted ones included). */
  audit: (scope: { tenantId?: string; all?: boolean }, after: string | undefined, limit = 50) =>
    scope.all
      ? call<AuditPage>('GET', `/v1/audit${query({ tenantId: scope.tenantId, after, limit: String(limit) })}`)
      : call<AuditPage>('GET', `/v1/tenants/${enc(scope.tenantId ?? '')}/audit${query({ after, limit: String(limit) })}`),
};
