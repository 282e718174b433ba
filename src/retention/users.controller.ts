import { Controller, Delete, HttpCode, Param } from '@nestjs/common';
import { ApiBearerAuth, ApiNoContentResponse, ApiTags } from '@nestjs/swagger';
import { AuditBy, type AuditContext } from '../audit/audit-context.js';
import { ApiErrors, ApiRoute } from '../common/api-docs.js';
import { AppError } from '../common/app-error.js';
import { UserErasureService } from './user-erasure.service.js';

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenantId/users')
export class UsersController {
  constructor(private readonly erasure: UserErasureService) {}

  @Delete(':userId')
  @HttpCode(204)
  @ApiRoute(
    'eraseUser',
    "Erase one of the partner's end users",
    "Their connections (sealed tokens destroyed; the upstream's spec shows no revocation, so none is sent), renewal history, connect sessions, and the events attributed to them with their delivery attempts are gone when this answers; the tenant's target then gets a `user.erased` event carrying counts, no personal data. Idempotent: erasing again answers 204 too.",
  )
  @ApiNoContentResponse({ description: 'Everything of that user is gone.' })
  @ApiErrors('validation_failed', 'unauthorized', 'tenant_not_found')
  async erase(@Param('tenantId') tenantId: string, @Param('userId') userId: string, @AuditBy() by: AuditContext): Promise<void> {
    if (userId.length < 1 || userId.length > 200) throw new AppError('validation_failed', 'userId is 1 to 200 characters.');
    await this.erasure.erase(tenantId, userId, by);
  }
}
