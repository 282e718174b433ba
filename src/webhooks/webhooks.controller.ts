import { Body, Controller, Get, Headers, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import type { Request, Response } from 'express';
import { Public } from '../tenants/auth.decorators.js';
import { CreateWebhookDto } from './dto/create-webhook.dto.js';
import { InboundService } from './inbound.service.js';
import { WebhooksService, type UpstreamAnswer } from './webhooks.service.js';

@ApiTags('webhooks')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  @ApiRoute('createWebhook', 'Provision an upstream webhook', 'Without `targetURL`, it delivers to this service (`/inbound/...`) with a generated secret. Sent with the admin connection.')
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found', 'admin_not_connected', 'reauth_required', 'environment_not_configured', 'upstream_unavailable', 'upstream_timeout')
  @ApiOkResponse({ description: "The upstream's answer with its status (x-upstream-status), every Authorization value redacted." })
  async create(@Param('tenantId') tenantId: string, @Body() dto: CreateWebhookDto, @Res({ passthrough: true }) res: Response): Promise<unknown> {
    return passUpstream(res, await this.webhooks.create(tenantId, dto));
  }

  @Get()
  @ApiRoute('listWebhooks', "List the tenant's upstream webhooks", 'Sent with the admin connection.')
  @ApiErrors('unauthorized', 'tenant_not_found', 'admin_not_connected', 'reauth_required', 'environment_not_configured', 'upstream_unavailable', 'upstream_timeout')
  @ApiOkResponse({ description: "The upstream's list with its status (x-upstream-status), every Authorization value redacted." })
  async list(@Param('tenantId') tenantId: string, @Res({ passthrough: true }) res: Response): Promise<unknown> {
    return passUpstream(res, await this.webhooks.list(tenantId));
  }
}

@ApiTags('webhooks')
@Controller('inbound')
export class InboundController {
  constructor(private readonly inbound: InboundService) {}

  @Post(':tenantId/:receiverId')
  @Public()
  @HttpCode(200)
  @ApiOkResponse({ description: 'Stored durably; `{"id"}` is the event id (webhook-id of the forwarded delivery).' })
  @ApiOperation({
    operationId: 'receiveDelivery',
    summary: 'Receive an upstream webhook delivery',
    description: "Called by the upstream, not by partners. Authenticated by the `Authorization` value the webhook was provisioned with (401 `unauthorized` when missing or wrong, or for an unknown receiver), not by an API key. The body must be `application/json` (415 otherwise); JSON nested too deeply or holding a NUL or an unpaired surrogate escape is 400 `validation_failed`. Nothing is stored on any error.",
    security: [],
  })
  @ApiErrors('validation_failed', 'unauthorized', 'unsupported_media_type')
  accept(@Param('tenantId') tenantId: string, @Param('receiverId') receiverId: string, @Headers('authorization') authorization: string | undefined, @Req() req: Request): Promise<{ id: string }> {
    return this.inbound.accept(tenantId, receiverId, authorization, { contentType: req.headers['content-type'], body: req.body as unknown });
  }
}

function passUpstream(res: Response, answer: UpstreamAnswer): unknown {
  res.status(answer.status).setHeader('x-upstream-status', String(answer.status));
  if (typeof answer.body === 'string') {
    res.type(answer.contentType ?? 'text/plain');
    res.send(answer.body);
    return undefined;
  }
  return answer.body;
}
