import { Body, Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../common/api-errors.docs.js';
import { AppError } from '../common/app-error.js';
import { AttemptDto, AttemptsDto, EventDto, EventPageDto, ListEventsQueryDto, RedeliveredDto, RedeliverQueuedDto, RedeliverSinceDto } from './dto/event.dto.js';
import { EventsService, REDELIVER_MAX_PENDING, REDELIVER_PER_CALL } from './events.service.js';

const eventIdPipe = new ParseUUIDPipe({ exceptionFactory: () => new AppError('not_found', 'No such event.') });
const NO_TARGET = '`conflict` (the tenant has no eventsTargetUrl, or it is disabled after a 410 Gone)';

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiOperation({ summary: "A page of the tenant's events" })
  @ApiOkResponse({ type: EventPageDto, description: 'Upstream deliveries and the service\'s own connection.* events, oldest first, with their delivery state.' })
  @ApiErrors({ 400: '`validation_failed` (a bad limit, or an `after` this service did not give out)', 401: '`unauthorized`', 404: '`tenant_not_found`' })
  async list(@Param('tenantId') tenantId: string, @Query() query: ListEventsQueryDto): Promise<EventPageDto> {
    const page = await this.events.list(tenantId, query.after, query.limit);
    return { events: page.events.map(EventDto.from), next: page.next };
  }

  @Post('redeliver')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Deliver again every event received since a time, in a state',
    description: `Oldest first. One call queues at most ${REDELIVER_PER_CALL} events, and never more than leaves the tenant ${REDELIVER_MAX_PENDING} events waiting for delivery; \`remaining\` counts what matched but was not queued.`,
  })
  @ApiAcceptedResponse({ type: RedeliverQueuedDto })
  @ApiErrors({ 400: '`validation_failed`', 401: '`unauthorized`', 404: '`tenant_not_found`', 409: NO_TARGET })
  async redeliverSince(@Param('tenantId') tenantId: string, @Body() dto: RedeliverSinceDto): Promise<RedeliverQueuedDto> {
    return this.events.redeliverSince(tenantId, new Date(dto.since), dto.state ?? 'dead');
  }

  @Get(':eventId/attempts')
  @ApiOperation({ summary: "An event's delivery attempts" })
  @ApiOkResponse({ type: AttemptsDto })
  @ApiErrors({ 401: '`unauthorized`', 404: '`tenant_not_found`, `not_found` (no such event)' })
  async attempts(@Param('tenantId') tenantId: string, @Param('eventId', eventIdPipe) eventId: string): Promise<AttemptsDto> {
    return { attempts: (await this.events.attempts(tenantId, eventId)).map(AttemptDto.from) };
  }

  @Post(':eventId/redeliver')
  @HttpCode(202)
  @ApiOperation({ summary: 'Deliver one event again, under the same webhook-id' })
  @ApiAcceptedResponse({ type: RedeliveredDto })
  @ApiErrors({ 401: '`unauthorized`', 404: '`tenant_not_found`, `not_found` (no such event)', 409: NO_TARGET })
  async redeliver(@Param('tenantId') tenantId: string, @Param('eventId', eventIdPipe) eventId: string): Promise<RedeliveredDto> {
    await this.events.redeliver(tenantId, eventId);
    return { id: eventId };
  }
}
