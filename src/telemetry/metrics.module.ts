import { Module } from '@nestjs/common';
import { MetricsService } from './metrics.service.js';

/** The Prometheus registry, for modules that publish figures; /metrics serves it (OpsModule). */
@Module({
  providers: [MetricsService],
  exports: [MetricsService],
})
export class MetricsModule {}
