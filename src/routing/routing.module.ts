import { Module } from '@nestjs/common';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { QuotaModule } from '../quota/quota.module.js';
import { RefreshModule } from '../refresh/refresh.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { RouteCache } from './route-cache.js';
import { RoutingService } from './routing.service.js';

@Module({
  imports: [UpstreamModule, ChangesModule, TenantsModule, ConnectionsModule, RefreshModule, QuotaModule, MetricsModule],
  providers: [RouteCache, RoutingService],
  exports: [RoutingService],
})
export class RoutingModule {}
