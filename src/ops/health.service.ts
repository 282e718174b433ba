import { Injectable } from '@nestjs/common';
import { HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { AppError } from '../common/app-error.js';
import { OpsRepository } from './ops.repository.js';

@Injectable()
export class HealthService {
  constructor(
    private readonly checks: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly repo: OpsRepository,
  ) {}

  async ready() {
    try {
      return await this.checks.check([
        async () => {
          const session = this.indicators.check('database');
          try {
            await this.repo.ping();
            return session.up();
          } catch (e) {
            return session.down({ message: e instanceof Error ? e.message : 'unreachable' });
          }
        },
        async () => {
          const session = this.indicators.check('migrations');
          try {
            const pending = await this.repo.pendingMigrations();
            return pending.length === 0 ? session.up() : session.down({ pending });
          } catch {
            return session.down({ message: 'migrations table unreadable' });
          }
        },
      ]);
    } catch (e) {
      const details = typeof e === 'object' && e && 'response' in e ? ((e as { response: Record<string, unknown> }).response) : undefined;
      throw new AppError('service_unavailable', 'The service is not ready.', details);
    }
  }
}
