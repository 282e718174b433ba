import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { ApiKeysService } from '../tenants/api-keys.service.js';
import { AuthThrottle, throttled } from '../tenants/auth-throttle.js';
import { ConsoleSessionsService, type ConsoleSessionView } from './console-sessions.service.js';

@Injectable()
export class ConsoleService {
  constructor(
    private readonly keys: ApiKeysService,
    private readonly sessions: ConsoleSessionsService,
    private readonly throttle: AuthThrottle,
  ) {}

  /**
   * Only the operator key opens the console; the same check as the API's, then a new session. Failures are
   * counted per client and overall (AuthThrottle.signIn): past either bound, `429` with Retry-After.
   */
  async signIn(operatorKey: string, client: string): Promise<ConsoleSessionView & { token: string }> {
    await throttled(this.throttle.signIn, client, async () => {
      const principal = await this.keys.authenticate(operatorKey).catch(() => null);
      if (principal?.kind !== 'operator') throw new AppError('unauthorized', 'That is not the operator key.');
    });
    return this.sessions.start();
  }
}
