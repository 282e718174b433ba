import { Readable } from 'node:stream';
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/openapi.js';

export { verifyEvent, EventVerificationError, CONNECTION_EVENT_TYPES, SERVICE_EVENT_TYPES } from './events.js';
export type {
  ConnectionEventData,
  ConnectionEventType,
  EndpointEventData,
  RecordChangedData,
  ServiceEvent,
  ServiceEventData,
  ServiceEventType,
  SyncFailingData,
  SyncReadyData,
  UpstreamEvent,
  VerifiedEvent,
} from './events.js';
export type { components, paths } from './generated/openapi.js';

/** The id of a tenant's first endpoint: its eventsTargetUrl. */
export const FIRST_ENDPOINT_ID = '00000000-0000-0000-0000-000000000000';

// Named by route, not by schema: a schema renamed on the server side leaves these types in place.
type Json<R> = R extends { content: { 'application/json': infer T } } ? T : never;
export type Connection = Json<paths['/v1/tenants/{tenantId}/connections/{connectionId}']['get']['responses'][200]>;
export type ConnectSession = Json<paths['/v1/tenants/{tenantId}/connect-sessions']['post']['responses'][201]>;
export type CreateConnectSession = Json<NonNullable<paths['/v1/tenants/{tenantId}/connect-sessions']['post']['requestBody']>>;
export type EventPage = Json<paths['/v1/tenants/{tenantId}/events']['get']['responses'][200]>;
export type StoredEvent = EventPage['events'][number];

/** One page of connections (API.md section 6). */
export type ConnectionPage = Json<paths['/v1/tenants/{tenantId}/connections']['get']['responses'][200]>;

/** Filters and page size of a connections listing (`limit` 1 to 500), as the service's document gives them. */
export type AgentSession = Json<paths['/v1/tenants/{tenantId}/agent-sessions']['post']['responses'][201]>;
export type CreateAgentSession = Json<NonNullable<paths['/v1/tenants/{tenantId}/agent-sessions']['post']['requestBody']>>;
export type AgentSessionPage = Json<paths['/v1/tenants/{tenantId}/agent-sessions']['get']['responses'][200]>;
/** An event endpoint (API.md section 13), with its health; never its secret. */
export type Endpoint = Json<paths['/v1/tenants/{tenantId}/endpoints/{endpointId}']['get']['responses'][200]>;
export type EndpointHealth = Endpoint['health'];
/** The answer of `createEndpoint`: the endpoint and its signing `secret` (`whsec_…`), shown only there. */
export type CreatedEndpoint = Json<paths['/v1/tenants/{tenantId}/endpoints']['post']['responses'][201]>;
export type CreateEndpoint = Json<NonNullable<paths['/v1/tenants/{tenantId}/endpoints']['post']['requestBody']>>;
export type UpdateEndpoint = Json<NonNullable<paths['/v1/tenants/{tenantId}/endpoints/{endpointId}']['patch']['requestBody']>>;
export type RedeliverEndpoint = Json<NonNullable<paths['/v1/tenants/{tenantId}/endpoints/{endpointId}/redeliver']['post']['requestBody']>>;
/** An event as delivered (`{ type, timestamp, data }`), for `testEndpointFilter`. */
export type DeliveredEvent = Json<
  NonNullable<paths['/v1/tenants/{tenantId}/endpoints/{endpointId}/test-filter']['post']['requestBody']>
>['event'];
/** A page of synced records (API.md section 12): `items`, `next` (pass it as `after`), and `cursor` (this moment in the change feed). */
export type RecordPage = Json<paths['/v1/tenants/{tenantId}/records/workflows']['get']['responses'][200]>;
/** One synced workflow: `{ id, userId, data (the upstream's object), version, lastModified, syncedAt }`. */
export type SyncedRecord = RecordPage['items'][number];
export type RecordChangePage = Json<paths['/v1/tenants/{tenantId}/records/workflows/changes']['get']['responses'][200]>;
/** One entry of the change feed: `{ id, userId, action, version, data?, cursor }`. */
export type RecordChange = RecordChangePage['items'][number];
export type SyncStatePage = Json<paths['/v1/tenants/{tenantId}/sync']['get']['responses'][200]>;
export type SyncState = SyncStatePage['items'][number];
/**
 * What `changes()` yields: each change of the feed (`kind: 'change'`), or, when the cursor had expired
 * (`410 cursor_expired`), the whole current copy (`kind: 'reset'`: replace what you hold). Persist `cursor` of each.
 */
export type RecordFeedItem = ({ kind: 'change' } & RecordChange) | { kind: 'reset'; records: SyncedRecord[]; cursor: string };
export interface RecordChangesOptions {
  /** One user's changes (the whole tenant's without it). */
  userId?: string;
  /** Where to start: a `cursor` persisted before. Without it: from a fresh read of the records' `cursor` (now). */
  cursor?: string;
  /** Changes asked per request (1 to 1000; the service's default 100). */
  pageSize?: number;
  /** How long to wait before asking again once caught up (default 5000 ms). */
  pollIntervalMs?: number;
  /** Ends the iteration (no error) when aborted, also while it waits. */
  signal?: AbortSignal;
}
export type ConnectionFilter = Omit<NonNullable<paths['/v1/tenants/{tenantId}/connections']['get']['parameters']['query']>, 'after'>;

/** An answer of cws-connect that is not a success: its own error (`code`), or the upstream's passed through (`upstreamStatus`). */
export class CwsApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
    /** Set when the answer is the upstream's own, passed through unchanged. */
    readonly upstreamStatus: number | null,
    readonly body: unknown,
  ) {
    super(message);
    this.name = 'CwsApiError';
  }
}

/** A facade call's answer: the upstream's status and JSON body (the upstream's shapes are not part of this service's document). */
export interface UpstreamAnswer<T = unknown> {
  status: number;
  data: T;
  headers: Headers;
}

/** A request body sent as a stream: a Node Readable, a web ReadableStream, or bytes, with its content type. */
export interface StreamedBody {
  body: Readable | ReadableStream<Uint8Array> | Uint8Array | string;
  contentType: string;
  /** Known length, if any (sent as content-length; otherwise the body is sent chunked). */
  contentLength?: number;
}

export interface CwsConnectClientOptions {
  /** The service's address, e.g. https://connect.example.com */
  baseUrl: string;
  /** A tenant key (cwsk_…) or the operator key. */
  apiKey: string;
  /** The tenant every call is made for. */
  tenantId: string;
  fetch?: typeof globalThis.fetch;
}

type UserCall = { userId?: string; headers?: Record<string, string> };

/**
 * The cws-connect API for one tenant. `api` is the full typed client (openapi-fetch over the types generated
 * from the service's OpenAPI document) for anything this face does not cover.
 */
export class CwsConnectClient {
  readonly api: Client<paths>;
  readonly tenantId: string;
  private readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchImpl: typeof globalThis.fetch;

  constructor(options: CwsConnectClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.apiKey = options.apiKey;
    this.tenantId = options.tenantId;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({ baseUrl: this.baseUrl, headers: { authorization: `Bearer ${this.apiKey}` }, fetch: this.fetchImpl });
  }

  private get tenant() {
    return { path: { tenantId: this.tenantId } };
  }

  /** A single-use link (10 minutes) to send the user's browser to, or to open with the browser module. */
  async createConnectSession(body: CreateConnectSession): Promise<ConnectSession> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/connect-sessions', { params: this.tenant, body });
    return ok(data, error, response);
  }

  async getConnection(connectionId: string): Promise<Connection> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/connections/{connectionId}', {
      params: { path: { tenantId: this.tenantId, connectionId } },
    });
    return ok(data, error, response);
  }

  /** Destroys the connection and its tokens. */
  async deleteConnection(connectionId: string): Promise<void> {
    const { error, response } = await this.api.DELETE('/v1/tenants/{tenantId}/connections/{connectionId}', {
      params: { path: { tenantId: this.tenantId, connectionId } },
    });
    if (!response.ok) throw toApiError(response, error);
  }

  async refreshConnection(connectionId: string): Promise<Connection> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/connections/{connectionId}/refresh', {
      params: { path: { tenantId: this.tenantId, connectionId } },
    });
    return ok(data, error, response);
  }

  /** One page of connections; pass the `next` of a page as `after` for the following one. */
  async connectionsPage(filter: ConnectionFilter & { after?: string } = {}): Promise<ConnectionPage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/connections', {
      params: { path: { tenantId: this.tenantId }, query: filter },
    });
    return ok(data, error, response);
  }

  /** An agent session for one of your users (docs/agents.md): give the agent `mcpUrl` and `token` (shown only here). */
  async createAgentSession(body: CreateAgentSession): Promise<AgentSession> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/agent-sessions', { params: this.tenant, body });
    return ok(data, error, response);
  }

  /** One page of agent sessions (never their tokens), optionally one user's. */
  async agentSessionsPage(query: { userId?: string; limit?: number; after?: string } = {}): Promise<AgentSessionPage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/agent-sessions', {
      params: { path: { tenantId: this.tenantId }, query },
    });
    return ok(data, error, response);
  }

  /** The agent is refused from now on, by every instance. */
  async revokeAgentSession(sessionId: string): Promise<void> {
    const { error, response } = await this.api.DELETE('/v1/tenants/{tenantId}/agent-sessions/{sessionId}', {
      params: { path: { tenantId: this.tenantId, sessionId } },
    });
    if (!response.ok) throw toApiError(response, error);
  }

  /** Every connection matching the filter, page after page (`for await (const c of client.listConnections())`). */
  async *listConnections(filter: ConnectionFilter = {}): AsyncGenerator<Connection> {
    let after: string | undefined;
    for (;;) {
      const page = await this.connectionsPage({ ...filter, after });
      yield* page.connections;
      if (!page.next || page.connections.length === 0) return;
      after = page.next;
    }
  }

  /** One page of events, oldest first; an empty page answers the cursor it was given, so a poller can keep it. */
  async eventsPage(options: { after?: string; limit?: number } = {}): Promise<EventPage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/events', {
      params: { path: { tenantId: this.tenantId }, query: { after: options.after, limit: options.limit } },
    });
    return ok(data, error, response);
  }

  /** Every event after `after` (from the start without it) up to now, page after page. */
  async *events(options: { after?: string; pageSize?: number } = {}): AsyncGenerator<StoredEvent> {
    let after = options.after;
    for (;;) {
      const page = await this.eventsPage({ after, limit: options.pageSize });
      yield* page.events;
      if (page.events.length === 0 || !page.next) return;
      after = page.next;
    }
  }

  /** Adds an event endpoint; its signing `secret` (`whsec_…`) is in this answer only: store it now. */
  async createEndpoint(body: CreateEndpoint): Promise<CreatedEndpoint> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/endpoints', { params: this.tenant, body });
    return ok(data, error, response);
  }

  /** Every event endpoint of the tenant with its health, eventsTargetUrl first (id `FIRST_ENDPOINT_ID`) when set. */
  async listEndpoints(): Promise<Endpoint[]> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/endpoints', { params: this.tenant });
    return ok(data, error, response).endpoints;
  }

  async getEndpoint(endpointId: string): Promise<Endpoint> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/endpoints/{endpointId}', {
      params: { path: { tenantId: this.tenantId, endpointId } },
    });
    return ok(data, error, response);
  }

  /** Changes the fields given; `{ disabled: false }` enables a disabled endpoint again (and resets its failure clock). */
  async updateEndpoint(endpointId: string, body: UpdateEndpoint): Promise<Endpoint> {
    const { data, error, response } = await this.api.PATCH('/v1/tenants/{tenantId}/endpoints/{endpointId}', {
      params: { path: { tenantId: this.tenantId, endpointId } },
      body,
    });
    return ok(data, error, response);
  }

  /** Removes the endpoint and its deliveries (the first endpoint: unsets eventsTargetUrl). */
  async deleteEndpoint(endpointId: string): Promise<void> {
    const { error, response } = await this.api.DELETE('/v1/tenants/{tenantId}/endpoints/{endpointId}', {
      params: { path: { tenantId: this.tenantId, endpointId } },
    });
    if (!response.ok) throw toApiError(response, error);
  }

  /**
   * A new signing secret (`whsec_…`, returned only here). For `overlapSeconds` (service default 86400, 0: none)
   * every delivery carries both signatures, so the receiver can switch secrets without refusing anything.
   */
  async rotateEndpointSecret(endpointId: string, options: { overlapSeconds?: number } = {}): Promise<string> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/endpoints/{endpointId}/secret', {
      params: { path: { tenantId: this.tenantId, endpointId } },
      body: options,
    });
    return ok(data, error, response).secret;
  }

  /** Queues again the endpoint's `failed` (default), `missed` (while disabled) or `any` deliveries since a time; answers how many. */
  async redeliverEndpoint(endpointId: string, body: RedeliverEndpoint): Promise<number> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/endpoints/{endpointId}/redeliver', {
      params: { path: { tenantId: this.tenantId, endpointId } },
      body,
    });
    return ok(data, error, response).queued;
  }

  /** Whether the endpoint's event types and filter would take this event (as delivered: `{ type, timestamp, data }`). */
  async testEndpointFilter(endpointId: string, event: DeliveredEvent): Promise<boolean> {
    const { data, error, response } = await this.api.POST('/v1/tenants/{tenantId}/endpoints/{endpointId}/test-filter', {
      params: { path: { tenantId: this.tenantId, endpointId } },
      body: { event },
    });
    return ok(data, error, response).matches;
  }

  /** One page of the synced copy (API.md section 12): one user's records (every user's with `userId` undefined). */
  async listRecords(userId: string | undefined, options: { limit?: number; after?: string } = {}): Promise<RecordPage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/records/workflows', {
      params: { path: { tenantId: this.tenantId }, query: { userId, limit: options.limit, after: options.after } },
    });
    return ok(data, error, response);
  }

  /** One workflow of the user's copy; `404 record_not_found` when that user's copy does not hold it. */
  async getRecord(userId: string, workflowId: string): Promise<SyncedRecord> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/records/workflows/{workflowId}', {
      params: { path: { tenantId: this.tenantId, workflowId }, query: { userId } },
    });
    return ok(data, error, response);
  }

  /** One page of the change feed after `cursor` (from the oldest kept without it); an empty page means caught up. */
  async recordChangesPage(
    options: { cursor?: string; userId?: string; limit?: number } = {},
    signal?: AbortSignal,
  ): Promise<RecordChangePage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/records/workflows/changes', {
      params: { path: { tenantId: this.tenantId }, query: { cursor: options.cursor, userId: options.userId, limit: options.limit } },
      signal,
    });
    return ok(data, error, response);
  }

  /** Each synced user's sync state (`state`, `records`, `lastListedAt`, `nextListAt`, …), one page; optionally one user's. */
  async syncState(options: { userId?: string; limit?: number; after?: string } = {}): Promise<SyncStatePage> {
    const { data, error, response } = await this.api.GET('/v1/tenants/{tenantId}/sync', {
      params: { path: { tenantId: this.tenantId }, query: options },
    });
    return ok(data, error, response);
  }

  /** Lists one user (or every synced user of the tenant) now; the listing runs in the background. */
  async syncNow(userId?: string): Promise<void> {
    const { error, response } = await this.api.POST('/v1/tenants/{tenantId}/sync', {
      params: this.tenant,
      body: userId === undefined ? {} : { userId },
    });
    if (!response.ok) throw toApiError(response, error);
  }

  /**
   * The change feed, followed for ever: every change after `cursor` (or after a fresh read of the records' cursor),
   * oldest first, then a new ask every `pollIntervalMs` once caught up, until `signal` aborts (or the loop breaks).
   * A `410 cursor_expired` yields `{ kind: 'reset', records, cursor }` (the copy read again whole: replace what you
   * hold) and goes on from its cursor. Persist the `cursor` of each item to resume there without repeats.
   */
  async *changes(options: RecordChangesOptions = {}): AsyncGenerator<RecordFeedItem> {
    const { userId, pageSize, signal } = options;
    const interval = options.pollIntervalMs ?? 5000;
    try {
      let cursor = options.cursor ?? (await this.listRecords(userId, { limit: 1 })).cursor;
      while (!signal?.aborted) {
        let page: RecordChangePage;
        try {
          page = await this.recordChangesPage({ cursor, userId, limit: pageSize }, signal);
        } catch (e) {
          if (!(e instanceof CwsApiError) || e.code !== 'cursor_expired') throw e;
          const reset = await this.readCopy(userId);
          yield { kind: 'reset', ...reset };
          cursor = reset.cursor;
          continue;
        }
        for (const change of page.items) yield { kind: 'change', ...change };
        cursor = page.next;
        // A short page: caught up (the service's default page is 100).
        if (page.items.length < (pageSize ?? 100)) await pause(interval, signal);
      }
    } catch (e) {
      if (signal?.aborted) return;
      throw e;
    }
  }

  /** The whole copy (one user's, or the tenant's), page after page, with the cursor of its first page. */
  private async readCopy(userId: string | undefined): Promise<{ records: SyncedRecord[]; cursor: string }> {
    const first = await this.listRecords(userId, { limit: 1000 });
    const records = [...first.items];
    let next = first.next;
    while (next) {
      const page = await this.listRecords(userId, { limit: 1000, after: next });
      records.push(...page.items);
      next = page.next;
    }
    return { records, cursor: first.cursor };
  }

  /** The upstream's workflow endpoints, called with the token of the user named by `userId` (API.md section 7). */
  readonly workflows = {
    list: (o: UserCall & { query?: Record<string, string> } = {}) => this.upstream('GET', `/workflows${o.query ? query(o.query) : ''}`, o),
    get: (workflowId: string, o: UserCall = {}) => this.upstream('GET', `/workflows/${segment(workflowId)}`, o),
    /** JSON fields, or a streamed multipart body (documents as file parts). */
    launch: (body: object | StreamedBody, o: UserCall = {}) => this.upstream('POST', '/workflows', o, body),
    launchAsync: (body: object | StreamedBody, o: UserCall = {}) => this.upstream('POST', '/workflows/async', o, body),
    approve: (workflowId: string, body: object = {}, o: UserCall = {}) =>
      this.upstream('PATCH', `/workflows/${segment(workflowId)}/approvals`, o, body),
    /** A streamed multipart body; the workflow must be in its Sign step. */
    uploadSigned: (workflowId: string, body: StreamedBody, o: UserCall = {}) =>
      this.upstream('POST', `/workflows/${segment(workflowId)}/upload-signed`, o, body),
  };

  /** The acting user's upstream profile (/userinfo with that user's token). */
  me(o: UserCall = {}): Promise<UpstreamAnswer> {
    return this.upstream('GET', '/me', o);
  }

  /**
   * Any upstream endpoint through the generic proxy, as is: the raw Response, its body unread (stream it, or
   * read it). Not thrown on a non-2xx: an upstream answer carries `x-upstream-status`.
   */
  proxy(method: string, upstreamPath: string, o: UserCall & { body?: object | StreamedBody } = {}): Promise<Response> {
    return this.send(method, `/proxy/${upstreamPath.replace(/^\/+/, '')}`, o, o.body);
  }

  private async upstream(method: string, path: string, o: UserCall, body?: object | StreamedBody): Promise<UpstreamAnswer> {
    const res = await this.send(method, path, o, body);
    return { status: res.status, data: await json(res), headers: res.headers };
  }

  private async send(method: string, path: string, o: UserCall = {}, body?: object | StreamedBody): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...o.headers, authorization: `Bearer ${this.apiKey}` };
    if (o.userId !== undefined) headers['x-user-id'] = o.userId;
    const init: RequestInit & { duplex?: 'half' } = { method, headers };
    if (body !== undefined) {
      if (isStreamed(body)) {
        headers['content-type'] = body.contentType;
        if (body.contentLength !== undefined) headers['content-length'] = String(body.contentLength);
        init.body = body.body instanceof Readable ? (Readable.toWeb(body.body) as ReadableStream<Uint8Array>) : body.body;
        // A streamed request body needs half duplex in fetch (undici).
        init.duplex = 'half';
      } else {
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
    }
    return this.fetchImpl(`${this.baseUrl}/v1/tenants/${segment(this.tenantId)}${path}`, init);
  }
}

/** Waits `ms`, or less when `signal` aborts (then resolves: the caller checks the signal). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

function isStreamed(body: object | StreamedBody): body is StreamedBody {
  return (
    'contentType' in body &&
    'body' in body &&
    (body.body instanceof Readable ||
      body.body instanceof ReadableStream ||
      body.body instanceof Uint8Array ||
      typeof body.body === 'string')
  );
}

function ok<T>(data: T | undefined, error: unknown, response: Response): T {
  if (!response.ok || data === undefined) throw toApiError(response, error);
  return data;
}

async function json(res: Response): Promise<unknown> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON: keep the text */
  }
  if (!res.ok) throw toApiError(res, body);
  return body;
}

function toApiError(res: Response, body: unknown): CwsApiError {
  const upstream = res.headers.get('x-upstream-status');
  const err = typeof body === 'object' && body !== null && 'error' in body ? (body as { error: unknown }).error : undefined;
  const own = !upstream && typeof err === 'object' && err !== null ? (err as { code?: unknown; message?: unknown }) : undefined;
  const code = typeof own?.code === 'string' ? own.code : upstream ? 'upstream_error' : `http_${res.status}`;
  const message =
    typeof own?.message === 'string' ? own.message : `${res.status} ${res.statusText || 'error'}${upstream ? ' from the upstream' : ''}`;
  return new CwsApiError(res.status, code, message, res.headers.get('x-request-id'), upstream ? Number(upstream) : null, body);
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

function segment(s: string): string {
  return encodeURIComponent(s);
}
