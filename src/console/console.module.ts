import { Module } from '@nestjs/common';
import { TenantsModule } from '../tenants/tenants.module.js';
import { ConsoleFiguresService } from './console-figures.service.js';
import { ConsoleSessionsModule } from './console-sessions.module.js';
import { ConsoleController } from './console.controller.js';
import { ConsoleService } from './console.service.js';

/** The operator's web console at /console: a static page that calls the same /v1 API the partner uses. */
@Module({
  imports: [TenantsModule, ConsoleSessionsModule],
  controllers: [ConsoleController],
  providers: [ConsoleService, ConsoleFiguresService],
})
export class ConsoleModule {}
