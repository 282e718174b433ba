import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { ConsoleFiguresService } from './console-figures.service.js';
import { ConsoleController } from './console.controller.js';
import { ConsoleService } from './console.service.js';

/** The operator's web console at /console: a static page that calls the same /v1 API the partner uses. */
@Module({
  imports: [AuthModule, MetricsModule, AuditModule],
  controllers: [ConsoleController],
  providers: [ConsoleService, ConsoleFiguresService],
})
export class ConsoleModule {}
