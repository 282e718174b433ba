import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { EventDto, EventPageDto, ListEventsQueryDto } from './dto/event.dto.js';
import { EventsService } from './events.service.js';

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiOkResponse({ type: EventPageDto, description: 'Upstream deliveries and the service\'s own connection.* events, oldest first, with their delivery state.' })
  async list(@Param('tenantId') tenantId: string, @Query() query: ListEventsQueryDto): Promise<EventPageDto> {
    const page = await this.events.list(tenantId, query.after, query.limit);
    return { events: page.events.map(EventDto.from), next: page.next };
  }
}
