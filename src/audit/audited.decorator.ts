import { SetMetadata } from '@nestjs/common';
import type { AuditAction, AuditRecord } from './audit-entry.js';

export const AUDITED = 'cws:audited';

/** What a route's row says besides its action, from the path parameters and the handler's answer. */
export type AuditDescription = (params: Record<string, string>, result: unknown) => Pick<AuditRecord, 'tenantId' | 'target'>;

export interface AuditSpec {
  action: AuditAction;
  describe: AuditDescription;
}

const byTenantParam: AuditDescription = (params) => ({ tenantId: params.tenantId ?? null, target: null });

/**
 * The route changes credentials or data: AuditInterceptor writes one row after it, `success` when it answers
 * below 400 and `failure` when it throws or answers 400 or more. By default the row names the path's
 * tenant and no target. Never the end user: an erasure's row must not carry the user it erased.
 */
export const Audited = (action: AuditAction, describe: AuditDescription = byTenantParam) =>
  SetMetadata(AUDITED, { action, describe } satisfies AuditSpec);
