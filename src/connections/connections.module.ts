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
import { ConnectionEntity } from './connection.entity.js';
import { ConnectionsController } from './connections.controller.js';
import { ConnectionsRepository } from './connections.repository.js';
import { ConnectionsService } from './connections.service.js';
import { OAuthController } from './oauth.controller.js';
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
  providers: [ConnectionsRepository, ConnectSessionsRepository, ConnectionsService, ConnectService, ConnectPopupService, ConnectionTokens],
  exports: [ConnectionsService, ConnectionsRepository, ConnectionTokens],
})
export class ConnectionsModule {}
