import { backoffMs } from '../common/backoff.js';
import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import pg from 'pg';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';

/** The channel the triggers of migrations ConnectionChangeNotify, GroupedConnectionChanges and CreateAgentSessions notify on. */
export const CHANGES_CHANNEL = 'cws_changes';

/** `quota_pauses` is told by the quota module itself (QuotaWindowsRepository.pause), its id `<class>:<until ms>`. */
export type ChangedTable = 'connections' | 'tenants' | 'tenant_api_keys' | 'quota_pauses' | 'agent_sessions';

export interface Change {
  table: ChangedTable;
  tenantId: string;
  id: string;
}

export type ChangeHandler = (change: Change) => void;

const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5000;
const PING_INTERVAL_MS = 5000;

/**
 * Row changes of every instance, heard through PostgreSQL LISTEN on one dedicated client per instance.
 *
 * In-process caches may serve from memory only while `live` is true: then every change committed since
 * the cache was last flushed has been, or is being, delivered here. When the client drops, `live` turns
 * false at once (caches are bypassed and flushed, correctness first), and it turns true again only after
 * LISTEN succeeded on a new client, which is when `onReset` handlers flush again: anything committed while
 * nobody listened is forgotten, so nothing cached from before may survive.
 */
@Injectable()
export class ChangeFeed implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('ChangeFeed');
  private readonly handlers: ChangeHandler[] = [];
  private readonly resetHandlers: Array<() => void> = [];
  private client: pg.Client | null = null;
  private stopped = false;
  private reconnects = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private connecting: Promise<void> | null = null;
  private listenedBefore = false;
  /** True while LISTEN is in place on a healthy client. */
  live = false;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  onModuleInit(): Promise<void> {
    // Startup waits for the first attempt only: a database that is down now must not stop the app (caches stay bypassed).
    return this.connect();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.markDown();
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  subscribe(handler: ChangeHandler): void {
    this.handlers.push(handler);
  }

  /** Called whenever cached state can no longer be trusted: on every disconnect and every reconnect. */
  onReset(handler: () => void): void {
    this.resetHandlers.push(handler);
  }

  /** For tests and operations: drop the listening client as a network failure would. */
  simulateDisconnect(): void {
    const client = this.client;
    if (client) this.lost(client, new Error('simulated disconnect'));
  }

  private connect(): Promise<void> {
    if (this.connecting) return this.connecting;
    this.connecting = this.doConnect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async doConnect(): Promise<void> {
    if (this.stopped || !this.config.databaseUrl) return;
    const client = new pg.Client({
      connectionString: this.config.databaseUrl,
      keepAlive: true,
      application_name: `cws-connect ${this.config.instanceId} changes`,
      query_timeout: PING_INTERVAL_MS,
    });
    client.on('error', (e: Error) => this.lost(client, e));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (msg: pg.Notification) => {
      if (msg.channel === CHANGES_CHANNEL && msg.payload && this.client === client) this.deliver(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
    } catch (e) {
      await client.end().catch(() => undefined);
      this.scheduleReconnect(e);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.reconnects = 0;
    // Flush before going live: whatever changed while nobody listened was never heard.
    this.reset();
    this.live = true;
    this.pingTimer = setInterval(() => void this.ping(client), PING_INTERVAL_MS);
    this.pingTimer.unref();
    // Routine at start; after a lost connection, the recovery an operator looks for.
    if (this.listenedBefore) this.logger.log('listening for row changes again');
    else this.logger.debug('listening for row changes');
    this.listenedBefore = true;
  }

  /** A half-open TCP connection raises no error by itself; a periodic round trip finds it. */
  private async ping(client: pg.Client): Promise<void> {
    try {
      await client.query('SELECT 1');
    } catch (e) {
      this.lost(client, e);
    }
  }

  private lost(client: pg.Client, e: unknown): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    this.markDown();
    client.end().catch(() => undefined);
    if (!this.stopped) {
      this.logger.warn(
        { err: e instanceof Error ? e.message : String(e) },
        'change listener disconnected: caches bypassed until it is back',
      );
      this.scheduleReconnect(e);
    }
  }

  private markDown(): void {
    const wasLive = this.live;
    this.live = false;
    if (wasLive) this.reset();
  }

  private scheduleReconnect(e: unknown): void {
    if (this.stopped || this.retryTimer) return;
    const delay = backoffMs(this.reconnects++, { baseMs: MIN_BACKOFF_MS, capMs: MAX_BACKOFF_MS });
    this.logger.debug({ err: e instanceof Error ? e.message : String(e), delayMs: Math.round(delay) }, 'change listener reconnecting');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }

  private reset(): void {
    for (const h of this.resetHandlers) h();
  }

  private deliver(payload: string): void {
    const changes = parseChanges(payload);
    if (!changes) {
      // Unknown shape: the safe answer is to forget everything.
      this.reset();
      return;
    }
    for (const change of changes) for (const h of this.handlers) h(change);
  }
}

/**
 * `<table>:<tenant_id>:<id>`; a tenant id is a slug (no colon), so the id is everything after the second colon.
 * Connections are announced per statement and tenant (migration GroupedConnectionChanges): their ids are UUIDs,
 * comma-separated, `connections:<tenant_id>:<id>,<id>,...`.
 */
export function parseChanges(payload: string): Change[] | null {
  const a = payload.indexOf(':');
  const b = a < 0 ? -1 : payload.indexOf(':', a + 1);
  if (b < 0) return null;
  const table = payload.slice(0, a);
  if (
    table !== 'connections' &&
    table !== 'tenants' &&
    table !== 'tenant_api_keys' &&
    table !== 'quota_pauses' &&
    table !== 'agent_sessions'
  )
    return null;
  const tenantId = payload.slice(a + 1, b);
  const rest = payload.slice(b + 1);
  if (table !== 'connections') return [{ table, tenantId, id: rest }];
  const ids = rest.split(',');
  if (ids.some((id) => id.length === 0)) return null;
  return ids.map((id) => ({ table, tenantId, id }));
}
