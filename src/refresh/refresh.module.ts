import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { RefreshScheduler } from './refresh-scheduler.service.js';
import { RefreshController } from './refresh.controller.js';
import { RefreshRepository } from './refresh.repository.js';
import { RenewalService } from './renewal.service.js';

/** Token renewal: on demand (RenewalService, for routing) and ahead of expiry (RefreshScheduler). Needs ScheduleModule.forRoot() in the app. */
@Module({
  imports: [ConnectionsModule],
  controllers: [RefreshController],
  providers: [RefreshRepository, RefreshMetrics, RenewalService, RefreshScheduler],
  exports: [RenewalService],
})
export class RefreshModule {}
