import { Global, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthService } from './health.service.js';
import { MetricsService } from './metrics.service.js';
import { OpsController } from './ops.controller.js';
import { OpsRepository } from './ops.repository.js';
import { TracingLifecycle } from './tracing.js';

@Global()
@Module({
  // Readiness failures are not logged per probe: a database outage is logged once (common/database-outage.ts).
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [OpsController],
  providers: [HealthService, MetricsService, OpsRepository, TracingLifecycle],
  exports: [MetricsService],
})
export class OpsModule {}
