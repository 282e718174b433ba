import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { EventsModule } from '../events/events.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TenantsModule } from '../tenants/tenants.module.js';
import { ConnectSessionEntity } from './connect-session.entity.js';
import { ConnectPopupController } from './connect-popup.controller.js';
import { ConnectPopupService } from './connect-popup.service.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { ConnectService } from './connect.service.js';
import { ConnectionsController } from './connections.controller.js';
import { ConnectionsService } from './connections.service.js';
import { OAuthController } from './oauth.controller.js';
import { ConnectionHealthRepository } from './store/connection-health.repository.js';
import { ConnectionEntity } from './store/connection.entity.js';
import { ConnectionsRepository } from './store/connections.repository.js';
import { RenewalLeaseRepository } from './store/renewal-lease.repository.js';
import { RenewalSaveRepository } from './store/renewal-save.repository.js';
import { ConnectionTokens } from './token-fields.js';

@Module({
  imports: [
    UpstreamModule,
    VaultModule,
    EventsModule,
    TypeOrmModule.forFeature([ConnectionEntity, ConnectSessionEntity]),
    TenantsModule,
    AuditModule,
  ],
  controllers: [ConnectionsController, OAuthController, ConnectPopupController],
  providers: [
    ConnectionsRepository,
    ConnectionHealthRepository,
    RenewalLeaseRepository,
    RenewalSaveRepository,
    ConnectSessionsRepository,
    ConnectionsService,
    ConnectService,
    ConnectPopupService,
    ConnectionTokens,
  ],
  exports: [
    ConnectionsService,
    ConnectService,
    ConnectionsRepository,
    ConnectionHealthRepository,
    RenewalLeaseRepository,
    RenewalSaveRepository,
    ConnectSessionsRepository,
    ConnectionTokens,
  ],
})
export class ConnectionsModule {}
