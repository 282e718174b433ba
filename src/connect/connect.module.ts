import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { ConnectCompletionService } from './connect-completion.service.js';
import { ConnectPopupController } from './connect-popup.controller.js';
import { ConnectPopupService } from './connect-popup.service.js';
import { ConnectSessionEntity } from './connect-session.entity.js';
import { ConnectSessionsController } from './connect-sessions.controller.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { ConnectService } from './connect.service.js';
import { OAuthController } from './oauth.controller.js';

/**
 * Connecting a user or the admin (API.md section 5): connect sessions, the OAuth redirect and callback, the popup and
 * its completion page, and what a completed authorization stores (through the connections module's table).
 */
@Module({
  imports: [UpstreamModule, ConnectionsModule, TypeOrmModule.forFeature([ConnectSessionEntity]), TenantsModule, AuditModule],
  controllers: [ConnectSessionsController, OAuthController, ConnectPopupController],
  providers: [ConnectSessionsRepository, ConnectService, ConnectCompletionService, ConnectPopupService],
  exports: [ConnectSessionsRepository, ConnectService],
})
export class ConnectModule {}
