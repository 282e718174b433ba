import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module.js';
import { EventsModule } from '../events/events.module.js';
import { QuotaModule } from '../quota/quota.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { RecordsController } from './records.controller.js';
import { RecordsRepository } from './records.repository.js';
import { RecordsService } from './records.service.js';
import { SyncEngine } from './sync-engine.service.js';
import { SyncMetrics } from './sync-metrics.js';
import { SyncShare } from './sync-share.service.js';
import { SyncStateRepository } from './sync-state.repository.js';
import { TargetedReads } from './targeted-reads.service.js';
import { UserListing } from './user-listing.service.js';

/**
 * Synced records (API.md 12, docs/records.md): each syncing tenant's copy of its users' workflows (records,
 * sealed), the change feed (record_changes), each user's sync state (record_sync) and the engine that lists them.
 */
@Module({
  imports: [ConnectionsModule, EventsModule, QuotaModule, RoutingModule, TenantsModule, MetricsModule, VaultModule],
  controllers: [RecordsController],
  providers: [RecordsRepository, SyncStateRepository, SyncMetrics, SyncShare, UserListing, TargetedReads, SyncEngine, RecordsService],
  exports: [SyncEngine, RecordsService],
})
export class RecordsModule {}
