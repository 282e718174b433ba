import { Injectable } from '@nestjs/common';
import { ChangeFeed } from '../changes/change-feed.service.js';
import type { AgentSession } from './agent-sessions.repository.js';

/** The most sessions held at once (then everything is dropped and refilled by the calls that follow). */
const MAX_ENTRIES = 20_000;

/**
 * How long a session read from the database is trusted without asking again. The change feed drops a revoked
 * session on every instance at once; this is the backstop for a notification that never arrived (a listener
 * reconnecting flushes everything anyway).
 */
export const SESSION_CACHE_TTL_MS = 10_000;

interface Entry {
  session: AgentSession;
  loadedAt: number;
}

/**
 * Sessions found by their token's SHA-256 (hex), so that an MCP call whose session is known costs no database
 * round trip. Dropped when the session is revoked or removed, or its tenant changes (a deletion), on any instance;
 * bypassed while the change feed is not live; never older than SESSION_CACHE_TTL_MS.
 */
@Injectable()
export class AgentSessionCache {
  private readonly byHash = new Map<string, Entry>();
  private readonly hashById = new Map<string, string>();
  private epoch = 0;

  constructor(private readonly feed: ChangeFeed) {
    feed.onReset(() => this.clear());
    feed.subscribe((change) => {
      if (change.table === 'agent_sessions') this.dropId(change.id);
      else if (change.table === 'tenants') this.dropTenant(change.tenantId);
    });
  }

  get(hash: string, now: number): AgentSession | undefined {
    if (!this.feed.live) return undefined;
    const entry = this.byHash.get(hash);
    if (entry === undefined) return undefined;
    if (now - entry.loadedAt < SESSION_CACHE_TTL_MS) return entry.session;
    this.forget(hash, entry.session.id);
    return undefined;
  }

  /** The epoch to pass to `set`: a change heard between the read and the set makes the set a no-op. */
  mark(): number {
    return this.epoch;
  }

  set(hash: string, session: AgentSession, epoch: number, now: number): void {
    if (!this.feed.live || epoch !== this.epoch) return;
    if (this.byHash.size >= MAX_ENTRIES) this.clear();
    this.byHash.set(hash, { session, loadedAt: now });
    this.hashById.set(session.id, hash);
  }

  /** A session revoked here, or found changed: gone at once on this instance (the others hear of it by the feed). */
  dropId(id: string): void {
    this.epoch++;
    const hash = this.hashById.get(id);
    if (hash !== undefined) this.forget(hash, id);
  }

  size(): number {
    return this.byHash.size;
  }

  private dropTenant(tenantId: string): void {
    this.epoch++;
    for (const [hash, entry] of this.byHash) if (entry.session.tenantId === tenantId) this.forget(hash, entry.session.id);
  }

  private forget(hash: string, id: string): void {
    this.byHash.delete(hash);
    this.hashById.delete(id);
  }

  private clear(): void {
    this.epoch++;
    this.byHash.clear();
    this.hashById.clear();
  }
}
