import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthService } from './health.service.js';
import { MetricsAccess } from './metrics-access.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { OpsController } from './ops.controller.js';
import { OpsRepository } from './ops.repository.js';
import { TracingLifecycle } from '../telemetry/tracing.js';
import { VaultModule } from '../vault/vault.module.js';

@Module({
  // Readiness failures are not logged per probe: a database outage is logged once (common/database-outage.ts).
  imports: [TerminusModule.forRoot({ logger: false }), MetricsModule, VaultModule],
  controllers: [OpsController],
  providers: [HealthService, OpsRepository, TracingLifecycle, MetricsAccess],
})
export class OpsModule {}
