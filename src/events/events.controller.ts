import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { EventDto, EventPageDto, ListEventsQueryDto } from './dto/event.dto.js';
import { EventsService } from './events.service.js';

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiRoute('listEvents', "Page through a tenant's events")
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  @ApiOkResponse({ type: EventPageDto, description: 'Upstream deliveries and the service\'s own connection.* events, oldest first, with their delivery state.' })
  async list(@Param('tenantId') tenantId: string, @Query() query: ListEventsQueryDto): Promise<EventPageDto> {
    const page = await this.events.list(tenantId, query.after, query.limit);
    return { events: page.events.map(EventDto.from), next: page.next };
  }
}
