import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { ConnectModule } from '../connect/connect.module.js';
import { FacadeModule } from '../facade/facade.module.js';
import { RecordsModule } from '../records/records.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { WebhooksModule } from '../webhooks/webhooks.module.js';
import { AgentSessionCache } from './agent-session-cache.js';
import { AgentSessionsController } from './agent-sessions.controller.js';
import { AgentSessionsRepository } from './agent-sessions.repository.js';
import { AgentSessionsService } from './agent-sessions.service.js';
import { AgentToolCatalogue } from './agent-tool-catalogue.js';
import { AgentToolRunner } from './agent-tool-runner.js';
import { ConnectLinks } from './connect-links.js';
import { LaunchAndWait } from './launch-and-wait.js';
import { McpDoor } from './mcp-door.js';
import { McpToolServers } from './mcp-tool-server.js';
import { RecordTools } from './record-tools.js';
import { ToolCalls } from './tool-calls.js';

/**
 * Agents on a user's behalf (API.md section 10): the agent_sessions table and its routes, and the MCP endpoint
 * (McpDoor, served by the front door) whose tools are made from the OpenAPI document.
 */
@Module({
  imports: [
    AuthModule,
    AuditModule,
    ChangesModule,
    ConnectModule,
    ConnectionsModule,
    FacadeModule,
    RecordsModule,
    RoutingModule,
    TenantsModule,
    WebhooksModule,
  ],
  controllers: [AgentSessionsController],
  providers: [
    AgentSessionsRepository,
    AgentSessionCache,
    AgentSessionsService,
    AgentToolCatalogue,
    ToolCalls,
    LaunchAndWait,
    RecordTools,
    ConnectLinks,
    AgentToolRunner,
    McpToolServers,
    McpDoor,
  ],
  exports: [McpDoor, AgentSessionsRepository],
})
export class AgentsModule {}
