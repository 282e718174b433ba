import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { AuditService } from '../audit/audit.service.js';
import { AppError } from '../common/app-error.js';
import { requestIdOf } from '../common/request-id.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import { AuthThrottle } from '../auth/auth-throttle.js';
import { ConsoleSessionsService, type ConsoleSessionView } from '../auth/console-sessions.service.js';

@Injectable()
export class ConsoleService {
  constructor(
    private readonly keys: ApiKeysService,
    private readonly sessions: ConsoleSessionsService,
    private readonly audit: AuditService,
    private readonly throttle: AuthThrottle,
  ) {}

  /**
   * Only the operator key opens the console; the same check as the API's, then a new session. Failures are
   * counted per client and overall (AuthThrottle.signIn): past either bound, `429` with Retry-After (the API is
   * not touched). Both outcomes are audited: a success as the new session, a failure with no actor id (failures
   * within a minute share a row).
   */
  async signIn(operatorKey: string, req: Request): Promise<ConsoleSessionView & { token: string }> {
    const requestId = requestIdOf(req);
    await this.throttle.signIn(req, async () => {
      const principal = await this.keys.authenticate(operatorKey).catch(() => null);
      if (principal?.kind !== 'operator') {
        await this.audit.recordAfter({
          action: 'console.login',
          actor: { kind: 'console', id: null },
          tenantId: null,
          requestId,
          outcome: 'failure',
        });
        throw new AppError('unauthorized', 'That is not the operator key.');
      }
    });
    const session = await this.sessions.start();
    await this.audit.recordAfter({
      action: 'console.login',
      actor: { kind: 'console', id: session.id },
      tenantId: null,
      requestId,
      outcome: 'success',
    });
    return session;
  }

  /** Ends the browser's session everywhere; audited when there was one to end. */
  async signOut(req: Request): Promise<void> {
    const ended = await this.sessions.end(req);
    if (ended) {
      await this.audit.recordAfter({
        action: 'console.logout',
        actor: { kind: 'console', id: ended },
        tenantId: null,
        requestId: requestIdOf(req),
        outcome: 'success',
      });
    }
  }
}
