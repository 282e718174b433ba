import { Module } from '@nestjs/common';
import { ChangesModule } from '../changes/changes.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { QuotaMetrics } from './quota-metrics.js';
import { QuotaWindowsRepository } from './quota-windows.repository.js';
import { QuotaService } from './quota.service.js';

/** Each company's upstream budget, shared by every instance (docs/quotas.md): checked by routing before every resource call. */
@Module({
  imports: [ChangesModule, MetricsModule],
  providers: [QuotaWindowsRepository, QuotaMetrics, QuotaService],
  exports: [QuotaService],
})
export class QuotaModule {}
