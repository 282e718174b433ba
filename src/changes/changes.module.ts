import { Module } from '@nestjs/common';
import { ChangeFeed } from './change-feed.service.js';

/** Cross-instance change notifications (PostgreSQL LISTEN/NOTIFY) that keep in-process caches honest. */
@Module({
  providers: [ChangeFeed],
  exports: [ChangeFeed],
})
export class ChangesModule {}
