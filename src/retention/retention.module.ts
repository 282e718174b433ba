import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module.js';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ConnectModule } from '../connect/connect.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { EventsModule } from '../events/events.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { RetentionService } from './retention.service.js';
import { TenantPurge } from './tenant-purge.js';
import { UserErasureService } from './user-erasure.service.js';
import { UsersController } from './users.controller.js';

/**
 * What is removed, and when: expired event partitions, shorter tenant windows, deleted tenants' rows
 * (RetentionService, TenantPurge), and the erasure of an end user (UserErasureService).
 */
@Module({
  imports: [TenantsModule, AuthModule, EventsModule, ConnectionsModule, ConnectModule, AuditModule, AgentsModule],
  controllers: [UsersController],
  providers: [RetentionService, TenantPurge, UserErasureService],
  exports: [RetentionService],
})
export class RetentionModule {}
