import { Module } from '@nestjs/common';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { EventsModule } from '../events/events.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { RefreshMetrics } from './refresh-metrics.service.js';
import { RefreshScheduler } from './refresh-scheduler.service.js';
import { RefreshController } from './refresh.controller.js';
import { PairCommit } from './pair-commit.js';
import { RenewalAttempt } from './renewal-attempt.js';
import { RenewalService } from './renewal.service.js';
import { TokenCall } from './token-call.js';

/** Token renewal: on demand (RenewalService, for routing) and ahead of expiry (RefreshScheduler). Needs ScheduleModule.forRoot() in the app. */
@Module({
  imports: [UpstreamModule, VaultModule, EventsModule, MetricsModule, ConnectionsModule],
  controllers: [RefreshController],
  providers: [RefreshMetrics, TokenCall, PairCommit, RenewalAttempt, RenewalService, RefreshScheduler],
  exports: [RenewalService],
})
export class RefreshModule {}
