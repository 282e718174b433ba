import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { EventsModule } from '../events/events.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TenantsModule } from '../tenants/tenants.module.js';
import { ConnectionEvents } from './connection-events.js';
import { ConnectionsController } from './connections.controller.js';
import { ConnectionsService } from './connections.service.js';
import { ConnectionHealthRepository } from './store/connection-health.repository.js';
import { ConnectionEntity } from './store/connection.entity.js';
import { ConnectionsRepository } from './store/connections.repository.js';
import { RenewalLeaseRepository } from './store/renewal-lease.repository.js';
import { RenewalSaveRepository } from './store/renewal-save.repository.js';
import { ConnectionTokens } from './connection-tokens.js';

@Module({
  imports: [VaultModule, EventsModule, TypeOrmModule.forFeature([ConnectionEntity]), TenantsModule, AuditModule],
  controllers: [ConnectionsController],
  providers: [
    ConnectionsRepository,
    ConnectionHealthRepository,
    RenewalLeaseRepository,
    RenewalSaveRepository,
    ConnectionsService,
    ConnectionEvents,
    ConnectionTokens,
  ],
  exports: [
    ConnectionsService,
    ConnectionsRepository,
    ConnectionHealthRepository,
    RenewalLeaseRepository,
    RenewalSaveRepository,
    ConnectionEvents,
    ConnectionTokens,
  ],
})
export class ConnectionsModule {}
