import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { ConnectService, SESSION_LIFETIME_MS } from '../connect/connect.service.js';
import { TenantsService } from '../tenants/tenants.service.js';
import type { AgentSession } from './agent-sessions.repository.js';

const MAX_LINKS = 10_000;
/** A link is given out again while it has at least this long to live. */
const REUSE_MARGIN_MS = 2 * 60_000;

/**
 * The connect link an agent shows its user when the user has no usable connection: a connect session of kind
 * `user` for the session's user (API.md section 5), returning to the tenant's first allowed return URL. One link
 * per agent session at a time (kept in memory until it nears its end), so a looping agent mints no flood of them.
 */
@Injectable()
export class ConnectLinks {
  private readonly logger = new Logger('ConnectLinks');
  private readonly links = new Map<string, { url: string; expiresAt: number }>();

  constructor(
    private readonly connect: ConnectService,
    private readonly tenants: TenantsService,
    private readonly clock: Clock,
  ) {}

  /** The link, or null when none can be made (the tenant allows no return URL, or the attempt failed). */
  async forSession(session: AgentSession): Promise<string | null> {
    const now = this.clock.now().getTime();
    const known = this.links.get(session.id);
    if (known !== undefined && known.expiresAt - REUSE_MARGIN_MS > now) return known.url;
    try {
      const tenant = await this.tenants.get(session.tenantId);
      const returnUrl = tenant.allowedReturnUrls[0];
      if (returnUrl === undefined) return null;
      const { connectUrl, expiresAt } = await this.connect.createSession(session.tenantId, {
        kind: 'user',
        userId: session.userId,
        returnUrl,
      });
      if (this.links.size >= MAX_LINKS) this.links.clear();
      this.links.set(session.id, { url: connectUrl, expiresAt: expiresAt.getTime() || now + SESSION_LIFETIME_MS });
      return connectUrl;
    } catch (e) {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not make a connect link for an agent');
      return null;
    }
  }
}
