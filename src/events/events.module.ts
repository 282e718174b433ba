import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { MetricsModule } from '../telemetry/metrics.module.js';
import { TenantsModule } from '../tenants/tenants.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { DeliveryMetrics } from './delivery-metrics.js';
import { EndpointDeliveriesRepository } from './endpoints/endpoint-deliveries.repository.js';
import { EndpointDeliveryService } from './endpoints/endpoint-delivery.service.js';
import { EndpointSecrets } from './endpoints/endpoint-secrets.js';
import { EndpointsController } from './endpoints/endpoints.controller.js';
import { EndpointsRepository } from './endpoints/endpoints.repository.js';
import { EndpointsService } from './endpoints/endpoints.service.js';
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
 * events API, and the signed outbound delivery (pg-boss); the tenant's event endpoints (endpoints/).
 */
@Module({
  imports: [TenantsModule, MetricsModule, VaultModule, AuditModule],
  controllers: [EventsController, EndpointsController],
  providers: [
    EventsRepository,
    EventDeliveryRepository,
    EventRedeliveryRepository,
    EventsRemoval,
    EventPartitions,
    EventsService,
    DeliveryMetrics,
    EventDeliveryService,
    EndpointsRepository,
    EndpointDeliveriesRepository,
    EndpointSecrets,
    EndpointDeliveryService,
    EndpointsService,
  ],
  exports: [EventsRepository, EventsRemoval, EventPartitions, EventDeliveryService],
})
export class EventsModule {}
