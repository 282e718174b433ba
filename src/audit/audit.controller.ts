import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { OperatorOnly } from '../auth/auth.decorators.js';
import { AuditService } from './audit.service.js';
import { AuditEntryDto, AuditPageDto, ListAllAuditQueryDto, ListAuditQueryDto } from './dto/audit.dto.js';

const PAGING =
  'Newest first, in a stable order; pass `next` back as `after` until it is null; an `after` this service did not give out for this listing is `validation_failed`.';

@ApiTags('audit')
@ApiBearerAuth()
@Controller('v1')
export class AuditController {
  constructor(@Inject(AuditService) private readonly audit: AuditService) {}

  @Get('audit')
  @OperatorOnly()
  @ApiRoute('listAudit', 'A page of the audit trail: every change of credentials or data', `${PAGING} Operator key only.`)
  @ApiOkResponse({ type: AuditPageDto })
  @ApiErrors('validation_failed', 'unauthorized', 'forbidden')
  async listAll(@Query() query: ListAllAuditQueryDto): Promise<AuditPageDto> {
    const page = await this.audit.list(query.tenantId ?? null, query);
    return { items: page.items.map(AuditEntryDto.from), next: page.next };
  }

  @Get('tenants/:tenantId/audit')
  @ApiRoute('listTenantAudit', "A page of the tenant's own audit rows", PAGING)
  @ApiOkResponse({ type: AuditPageDto })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  async listTenant(@Param('tenantId') tenantId: string, @Query() query: ListAuditQueryDto): Promise<AuditPageDto> {
    const page = await this.audit.list(tenantId, query);
    return { items: page.items.map(AuditEntryDto.from), next: page.next };
  }
}
