import { Module } from '@nestjs/common';
import { UpstreamClient } from './upstream-client.service.js';

@Module({
  providers: [UpstreamClient],
  exports: [UpstreamClient],
})
export class UpstreamModule {}
