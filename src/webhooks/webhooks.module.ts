import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module.js';
import { VaultModule } from '../vault/vault.module.js';
import { RecordsModule } from '../records/records.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { InboundService } from './inbound.service.js';
import { WebhookReceiversRepository } from './webhook-receivers.repository.js';
import { InboundDoor } from './inbound-door.js';
import { WebhooksController } from './webhooks.controller.js';
import { WebhooksService } from './webhooks.service.js';

/** Webhook provisioning through the admin connection and the inbound receiver (events: the events module). */
@Module({
  imports: [VaultModule, EventsModule, RoutingModule, RecordsModule],
  controllers: [WebhooksController],
  // The inbound receiver is served by InboundDoor through the front door (edge/front-door.ts), not by a controller.
  providers: [WebhookReceiversRepository, WebhooksService, InboundService, InboundDoor],
  exports: [WebhooksService],
})
export class WebhooksModule {}
