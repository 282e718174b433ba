import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { MetricsModule } from '../ops/metrics.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { ConsoleFiguresService } from './console-figures.service.js';
import { ConsoleSessionsModule } from './console-sessions.module.js';
import { ConsoleController } from './console.controller.js';
import { ConsoleService } from './console.service.js';

/** The operator's web console at /console: a static page that calls the same /v1 API the partner uses. */
@Module({
  imports: [TenantsModule, ConsoleSessionsModule, MetricsModule, AuditModule],
  controllers: [ConsoleController],
  providers: [ConsoleService, ConsoleFiguresService],
})
export class ConsoleModule {}
