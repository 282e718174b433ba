import { Module } from '@nestjs/common';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { UpstreamClient } from './upstream-client.service.js';
import { UpstreamMetrics } from './upstream-metrics.js';

@Module({
  imports: [MetricsModule],
  providers: [UpstreamClient, UpstreamMetrics],
  exports: [UpstreamClient],
})
export class UpstreamModule {}
