import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { AppError } from '../common/app-error.js';
import { Clock } from '../common/clock.js';
import { sha256 } from '../common/hash.js';
import { EXACT_TIME, KeysetCursor, pageOf, UUID_TEXT } from '../common/page-cursor.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { AgentSessionCache } from './agent-session-cache.js';
import { AgentSessionsRepository, type AgentSession, type SessionPosition } from './agent-sessions.repository.js';
import { AgentToolCatalogue } from './agent-tool-catalogue.js';

export const AGENT_TOKEN_PREFIX = 'cwsag_';
/** The path of the MCP endpoint under PUBLIC_URL. */
export const MCP_PATH = '/mcp';
export const DEFAULT_LIFETIME_SECONDS = 3600;
export const DEFAULT_SESSIONS_PAGE = 100;
export const MAX_SESSIONS_PAGE = 500;
/** How long a dead (expired or revoked) session stays listed before the sweep removes it. */
export const DEAD_KEPT_MS = 60 * 60_000;
const SWEEP_MS = 10 * 60_000;
const SWEEP_BATCH = 2000;
/** The use stamp (lastUsedAt) is written at most this often per session. */
const TOUCH_EVERY_MS = 60_000;

export interface MintInput {
  userId: string;
  tools?: string[];
  expiresInSeconds?: number;
  label?: string;
}

export interface MintedSession {
  session: AgentSession;
  token: string;
  mcpUrl: string;
}

/**
 * Agent sessions (API.md section 10): minted by the partner for one of its users, bound to that tenant, user,
 * tool grant and expiry, never widened; authenticated by the SHA-256 of their token (cached, AgentSessionCache);
 * revoked at once on every instance.
 */
@Injectable()
export class AgentSessionsService {
  private readonly logger = new Logger('AgentSessionsService');
  private readonly touched = new Map<string, number>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: AgentSessionsRepository,
    private readonly cache: AgentSessionCache,
    private readonly catalogue: AgentToolCatalogue,
    private readonly clock: Clock,
  ) {}

  get mcpUrl(): string {
    return `${this.config.publicUrl}${MCP_PATH}`;
  }

  async mint(tenantId: string, input: MintInput): Promise<MintedSession> {
    const tools = this.catalogue.grant(input.tools);
    if (tools.length === 0) throw new AppError('validation_failed', 'tools: the grant names no tool.');
    const now = this.clock.now();
    const token = `${AGENT_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const session: AgentSession = {
      id: randomUUID(),
      tenantId,
      userId: input.userId,
      label: input.label ?? null,
      tools,
      urlElicitation: false,
      createdAt: now,
      expiresAt: new Date(now.getTime() + (input.expiresInSeconds ?? DEFAULT_LIFETIME_SECONDS) * 1000),
      lastUsedAt: null,
      revokedAt: null,
    };
    const bounds = { perTenant: this.config.agents.perTenant, perUser: this.config.agents.perUser };
    const outcome = await this.repo.insertBounded({ ...session, tokenHash: sha256(token) }, bounds, now);
    if (outcome === 'user_full')
      throw new AppError(
        'agent_session_limit',
        `This user holds ${bounds.perUser} live agent sessions (AGENT_SESSIONS_PER_USER): revoke one or let one expire.`,
      );
    if (outcome === 'tenant_full')
      throw new AppError(
        'agent_session_limit',
        `This tenant holds ${bounds.perTenant} live agent sessions (AGENT_SESSIONS_PER_TENANT): revoke some or let them expire.`,
      );
    return { session, token, mcpUrl: this.mcpUrl };
  }

  async list(
    tenantId: string,
    q: { userId?: string; limit?: number; after?: string },
  ): Promise<{ items: AgentSession[]; next: string | null }> {
    const limit = q.limit ?? DEFAULT_SESSIONS_PAGE;
    const scope = `agent_sessions|${tenantId}|${q.userId ?? '*'}`;
    const after = q.after === undefined ? null : SESSION_CURSOR.decode(scope, q.after);
    const rows = await this.repo.listPage(tenantId, q.userId ?? null, after, limit);
    const page = pageOf(rows, limit, (last) => SESSION_CURSOR.encode(scope, last.position));
    return { items: page.items.map(({ position: _position, ...s }) => s), next: page.next };
  }

  /** Refused from now on, here at once and on every other instance when the change feed announces it. */
  async revoke(tenantId: string, id: string): Promise<AgentSession> {
    const session = await this.repo.revoke(tenantId, id, this.clock.now());
    this.cache.dropId(id);
    if (session === null) throw new AppError('agent_session_not_found', 'No such agent session.');
    return session;
  }

  /** The live session a bearer token stands for; `unauthorized` for anything else (unknown, expired, revoked, its tenant deleted). */
  async authenticate(presented: string | null): Promise<AgentSession> {
    if (presented === null || !presented.startsWith(AGENT_TOKEN_PREFIX) || presented.length > 200)
      throw new AppError('unauthorized', 'An agent session token is required: Authorization: Bearer cwsag_...');
    const hash = sha256(presented);
    const key = hash.toString('hex');
    const now = this.clock.now();
    let session = this.cache.get(key, now.getTime());
    if (session === undefined) {
      const epoch = this.cache.mark();
      const found = await this.repo.findLiveByTokenHash(hash, now);
      if (found === null) throw new AppError('unauthorized', 'The agent session token is not valid, has expired or was revoked.');
      this.cache.set(key, found, epoch, now.getTime());
      session = found;
    }
    if (session.expiresAt.getTime() <= now.getTime()) {
      throw new AppError('unauthorized', 'The agent session token is not valid, has expired or was revoked.');
    }
    this.touch(session, now);
    return session;
  }

  /** Remembers whether the MCP client of this session declared URL elicitation (its tools then ask through it). */
  async noteClient(session: AgentSession, urlElicitation: boolean): Promise<void> {
    if (session.urlElicitation === urlElicitation) return;
    await this.repo.setUrlElicitation(session.id, urlElicitation);
    session.urlElicitation = urlElicitation;
    this.cache.dropId(session.id);
  }

  private touch(session: AgentSession, now: Date): void {
    const last = this.touched.get(session.id) ?? 0;
    if (now.getTime() - last < TOUCH_EVERY_MS) return;
    if (this.touched.size >= 20_000) this.touched.clear();
    this.touched.set(session.id, now.getTime());
    this.repo.touch(session.id, now).catch((e: unknown) => {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not note the use of an agent session');
    });
  }

  /** Removes sessions dead (expired or revoked) for more than DEAD_KEPT_MS; answers how many. */
  async sweep(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - DEAD_KEPT_MS);
    let removed = 0;
    for (;;) {
      const n = await this.repo.deleteDeadBefore(before, SWEEP_BATCH);
      removed += n;
      if (n < SWEEP_BATCH) return removed;
    }
  }

  @Interval(SWEEP_MS)
  async sweepOnSchedule(): Promise<void> {
    try {
      const removed = await this.sweep();
      if (removed) this.logger.log({ removed }, 'removed dead agent sessions');
    } catch (e) {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not sweep agent sessions');
    }
  }
}

const SESSION_CURSOR = new KeysetCursor<SessionPosition>('s1', { at: EXACT_TIME, id: UUID_TEXT });
