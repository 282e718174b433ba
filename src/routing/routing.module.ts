import { Module } from '@nestjs/common';
import { ChangesModule } from '../changes/changes.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { RefreshModule } from '../refresh/refresh.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { RouteCache } from './route-cache.js';
import { RoutingService } from './routing.service.js';

@Module({
  imports: [ChangesModule, TenantsModule, ConnectionsModule, RefreshModule],
  providers: [RouteCache, RoutingService],
  exports: [RoutingService],
})
export class RoutingModule {}
