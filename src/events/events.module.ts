import { Module } from '@nestjs/common';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { DeliveryMetrics } from './delivery-metrics.js';
import { EventDeliveryRepository } from './event-delivery.repository.js';
import { EventDeliveryService } from './event-delivery.service.js';
import { EventsController } from './events.controller.js';
import { EventPartitions } from './event-partitions.js';
import { EventRedeliveryRepository } from './event-redelivery.repository.js';
import { EventsRemoval } from './events-removal.repository.js';
import { EventsRepository } from './events.repository.js';
import { EventsService } from './events.service.js';

/**
 * The events table: what the partner receives, from the upstream and from cws-connect itself; the
 * events API, and the signed outbound delivery (pg-boss).
 */
@Module({
  imports: [TenantsModule, MetricsModule],
  controllers: [EventsController],
  providers: [
    EventsRepository,
    EventDeliveryRepository,
    EventRedeliveryRepository,
    EventsRemoval,
    EventPartitions,
    EventsService,
    DeliveryMetrics,
    EventDeliveryService,
  ],
  exports: [EventsRepository, EventsRemoval, EventPartitions, EventDeliveryService],
})
export class EventsModule {}
