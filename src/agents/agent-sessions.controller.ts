import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Audited } from '../audit/audited.decorator.js';
import { ShowsSecret } from '../auth/auth.decorators.js';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { Clock } from '../common/clock.js';
import { uuidParam } from '../common/params.js';
import { AgentSessionsService } from './agent-sessions.service.js';
import {
  AgentSessionDto,
  AgentSessionPageDto,
  CreateAgentSessionDto,
  CreatedAgentSessionDto,
  ListAgentSessionsQueryDto,
} from './dto/agent-session.dto.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

@ApiTags('agents')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/agent-sessions')
export class AgentSessionsController {
  constructor(
    private readonly sessions: AgentSessionsService,
    private readonly clock: Clock,
  ) {}

  @Post()
  @ShowsSecret()
  @Audited('agent_session.created', (params, result) => ({
    tenantId: params.tenantId,
    target: result ? `agent-sessions/${(result as CreatedAgentSessionDto).id}` : null,
  }))
  @ApiRoute(
    'createAgentSession',
    'Let an AI agent act as one of your users (MCP)',
    'The agent connects to `mcpUrl` with `Authorization: Bearer <token>`; the token is in this answer only, bound to this tenant, this user, these tools and this expiry.',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'agent_session_limit')
  @ApiCreatedResponse({ type: CreatedAgentSessionDto })
  async create(@Param('tenantId') tenantId: string, @Body() dto: CreateAgentSessionDto): Promise<CreatedAgentSessionDto> {
    const { session, token, mcpUrl } = await this.sessions.mint(tenantId, dto);
    return { ...AgentSessionDto.from(session, this.clock.now()), mcpUrl, token };
  }

  @Get()
  @ApiRoute(
    'listAgentSessions',
    "A page of the tenant's agent sessions (never their tokens)",
    'Live ones, and dead ones (expired or revoked) for an hour after. Pass `next` back as `after` until it is null.',
  )
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  @ApiOkResponse({ type: AgentSessionPageDto })
  async list(@Param('tenantId') tenantId: string, @Query() query: ListAgentSessionsQueryDto): Promise<AgentSessionPageDto> {
    const page = await this.sessions.list(tenantId, query);
    const now = this.clock.now();
    return { items: page.items.map((s) => AgentSessionDto.from(s, now)), next: page.next };
  }

  @Delete(':sessionId')
  @HttpCode(204)
  @Audited('agent_session.revoked', (params) => ({
    tenantId: params.tenantId,
    target: UUID.test(params.sessionId) ? `agent-sessions/${params.sessionId}` : null,
  }))
  @ApiRoute('revokeAgentSession', 'Revoke an agent session', 'Refused on every instance from this answer on.')
  @ApiErrors('unauthorized', 'tenant_not_found', 'agent_session_not_found')
  @ApiNoContentResponse({ description: 'The session is revoked.' })
  async revoke(
    @Param('tenantId') tenantId: string,
    @Param('sessionId', uuidParam('agent_session_not_found', 'No such agent session.')) id: string,
  ): Promise<void> {
    await this.sessions.revoke(tenantId, id);
  }
}
