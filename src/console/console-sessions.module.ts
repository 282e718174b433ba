import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ConsoleSessionEntity } from './console-session.entity.js';
import { ConsoleSessionsRepository } from './console-sessions.repository.js';
import { ConsoleSessionsService } from './console-sessions.service.js';

/** The console's sessions on their own, so the API-key guard can accept one without importing the console. */
@Module({
  imports: [TypeOrmModule.forFeature([ConsoleSessionEntity])],
  providers: [ConsoleSessionsRepository, ConsoleSessionsService],
  exports: [ConsoleSessionsService],
})
export class ConsoleSessionsModule {}
