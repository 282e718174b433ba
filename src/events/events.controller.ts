import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { uuidParam } from '../common/params.js';
import {
  AttemptDto,
  AttemptsDto,
  EventDto,
  EventPageDto,
  ListEventsQueryDto,
  RedeliveredDto,
  RedeliverQueuedDto,
  RedeliverSinceDto,
} from './dto/event.dto.js';
import { EventsService, REDELIVER_MAX_PENDING, REDELIVER_PER_CALL } from './events.service.js';

const eventIdPipe = uuidParam('event_not_found', 'No such event.');

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiRoute('listEvents', "A page of the tenant's events", 'An `after` this service did not give out is `validation_failed`.')
  @ApiOkResponse({
    type: EventPageDto,
    description: "Upstream deliveries and the service's own connection.* events, oldest first, with their delivery state.",
  })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  async list(@Param('tenantId') tenantId: string, @Query() query: ListEventsQueryDto): Promise<EventPageDto> {
    const page = await this.events.list(tenantId, query.after, query.limit);
    return { events: page.events.map(EventDto.from), next: page.next };
  }

  @Post('redeliver')
  @HttpCode(202)
  @ApiRoute(
    'redeliverEventsSince',
    'Deliver again every event received since a time, in a state',
    `Oldest first. One call queues at most ${REDELIVER_PER_CALL} events, and never more than leaves the tenant ${REDELIVER_MAX_PENDING} events waiting for delivery; \`remaining\` counts what matched but was not queued. \`conflict\` when the tenant has no eventsTargetUrl, or it is disabled after a 410 Gone.`,
  )
  @ApiAcceptedResponse({ type: RedeliverQueuedDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'conflict')
  async redeliverSince(@Param('tenantId') tenantId: string, @Body() dto: RedeliverSinceDto): Promise<RedeliverQueuedDto> {
    return this.events.redeliverSince(tenantId, new Date(dto.since), dto.state ?? 'dead');
  }

  @Get(':eventId/attempts')
  @ApiRoute(
    'listEventAttempts',
    "An event's delivery attempts",
    'When, the HTTP status, how long, and the error class of each attempt; never a body or a URL.',
  )
  @ApiOkResponse({ type: AttemptsDto })
  @ApiErrors('unauthorized', 'tenant_not_found', 'event_not_found')
  async attempts(@Param('tenantId') tenantId: string, @Param('eventId', eventIdPipe) eventId: string): Promise<AttemptsDto> {
    return { attempts: (await this.events.attempts(tenantId, eventId)).map(AttemptDto.from) };
  }

  @Post(':eventId/redeliver')
  @HttpCode(202)
  @ApiRoute(
    'redeliverEvent',
    'Deliver one event again, under the same webhook-id',
    "`conflict` when the tenant has no eventsTargetUrl, or it is disabled after a 410 Gone; `event_expired` (410) when the event is older than the tenant's retention (`eventRetentionDays`).",
  )
  @ApiAcceptedResponse({ type: RedeliveredDto })
  @ApiErrors('unauthorized', 'tenant_not_found', 'event_not_found', 'conflict', 'event_expired')
  async redeliver(@Param('tenantId') tenantId: string, @Param('eventId', eventIdPipe) eventId: string): Promise<RedeliveredDto> {
    await this.events.redeliver(tenantId, eventId);
    return { id: eventId };
  }
}
