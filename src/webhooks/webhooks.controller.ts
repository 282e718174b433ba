import { Body, Controller, Get, Headers, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBadRequestResponse, ApiBearerAuth, ApiOkResponse, ApiTags, ApiUnauthorizedResponse, ApiUnsupportedMediaTypeResponse } from '@nestjs/swagger';
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
  @ApiOkResponse({ description: "The upstream's answer with its status (x-upstream-status), every Authorization value redacted." })
  async create(@Param('tenantId') tenantId: string, @Body() dto: CreateWebhookDto, @Res({ passthrough: true }) res: Response): Promise<unknown> {
    return passUpstream(res, await this.webhooks.create(tenantId, dto));
  }

  @Get()
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
  @ApiUnauthorizedResponse({ description: "A missing or wrong Authorization (the webhook's configured value), or an unknown receiver." })
  @ApiBadRequestResponse({ description: 'Not valid JSON, nested too deeply, or holding a NUL or an unpaired surrogate escape (`validation_failed`).' })
  @ApiUnsupportedMediaTypeResponse({ description: 'The body is not `application/json` (`unsupported_media_type`); nothing stored.' })
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
