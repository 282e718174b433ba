import { Global, Module } from '@nestjs/common';
import { UpstreamClient } from './upstream-client.service.js';
import { UpstreamMetrics } from './upstream-metrics.js';

@Global()
@Module({
  providers: [UpstreamClient, UpstreamMetrics],
  exports: [UpstreamClient],
})
export class UpstreamModule {}
