import { Global, Module } from '@nestjs/common';
import { EventsRepository } from './events.repository.js';

/** The events table: what the partner receives, from the upstream and from cws-connect itself. */
@Global()
@Module({
  providers: [EventsRepository],
  exports: [EventsRepository],
})
export class EventsModule {}
