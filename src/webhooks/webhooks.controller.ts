import { Body, Controller, Get, Param, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Audited } from '../audit/audited.decorator.js';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { upstreamAnswer } from '../upstream/upstream-openapi.js';
import type { Response } from 'express';
import { CreateWebhookDto } from './dto/create-webhook.dto.js';
import { WebhooksService, type UpstreamAnswer } from './webhooks.service.js';

@ApiTags('webhooks')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  @Audited('webhook.provisioned', (params, result) => ({ tenantId: params.tenantId, target: webhookTarget(result) }))
  @ApiRoute(
    'createWebhook',
    'Provision an upstream webhook',
    'Without `targetURL`, it delivers to this service (`/inbound/...`) with a generated secret. Sent with the admin connection.',
  )
  @ApiErrors(
    'validation_failed',
    'unauthorized',
    'tenant_not_found',
    'admin_not_connected',
    'reauth_required',
    'environment_not_configured',
    'too_many_requests',
    'quota_exhausted',
    'upstream_unavailable',
    'upstream_timeout',
  )
  @ApiResponse({ status: 201, ...upstreamAnswer('The new webhook, every Authorization value redacted.', 'UpstreamWebhook') })
  async create(
    @Param('tenantId') tenantId: string,
    @Body() dto: CreateWebhookDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<unknown> {
    return passUpstream(res, await this.webhooks.create(tenantId, dto));
  }

  @Get()
  @ApiRoute('listWebhooks', "List the tenant's upstream webhooks", 'Sent with the admin connection.')
  @ApiErrors(
    'unauthorized',
    'tenant_not_found',
    'admin_not_connected',
    'reauth_required',
    'environment_not_configured',
    'too_many_requests',
    'quota_exhausted',
    'upstream_unavailable',
    'upstream_timeout',
  )
  @ApiResponse({ status: 200, ...upstreamAnswer("The upstream's webhooks, every Authorization value redacted.", 'UpstreamWebhookList') })
  async list(@Param('tenantId') tenantId: string, @Res({ passthrough: true }) res: Response): Promise<unknown> {
    return passUpstream(res, await this.webhooks.list(tenantId));
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

/** The upstream's id of the webhook it created, when its answer names one. */
function webhookTarget(answer: unknown): string | null {
  const id = typeof answer === 'object' && answer !== null ? (answer as { id?: unknown }).id : undefined;
  return typeof id === 'string' || typeof id === 'number' ? `webhooks/${id}` : null;
}
