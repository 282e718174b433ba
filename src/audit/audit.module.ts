import { Module } from '@nestjs/common';
import { AuditLogRepository } from './audit-log.repository.js';
import { AuditController } from './audit.controller.js';
import { AuditService } from './audit.service.js';

/** The audit trail: the audit_log table, its routes and the retention sweep. */
@Module({
  controllers: [AuditController],
  providers: [AuditLogRepository, AuditService],
  exports: [AuditService],
})
export class AuditModule {}
