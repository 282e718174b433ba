import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { firstValueFrom, of, throwError } from 'rxjs';
import { AppError } from '../common/app-error.js';
import { SystemClock } from '../common/clock.js';
import type { AppConfig } from '../config/app-config.js';
import type { AuditRecord } from './audit-entry.js';
import type { AuditLogRepository } from './audit-log.repository.js';
import { AuditInterceptor } from './audit.interceptor.js';
import { AuditService } from './audit.service.js';
import { Audited } from './audited.decorator.js';

class Routes {
  @Audited('api_key.revoked', (params) => ({ tenantId: params.tenantId, target: `api-keys/${params.keyId}` }))
  revoke(): void {}

  plain(): void {}
}

/** An AuditService over a repository that keeps rows in memory, or fails every write. */
function auditService(failing: boolean): { service: AuditService; rows: AuditRecord[] } {
  const rows: AuditRecord[] = [];
  const repo = {
    insert: (r: AuditRecord) => (failing ? Promise.reject(new Error('database down')) : (rows.push(r), Promise.resolve())),
  } as unknown as AuditLogRepository;
  return { service: new AuditService({ audit: { retentionDays: 400 } } as AppConfig, repo, new SystemClock()), rows };
}

function contextFor(handler: () => void, statusCode = 200): ExecutionContext {
  const req = {
    params: { tenantId: 'acme', keyId: '3f1c2b4a-0d5e-4c6f-8a7b-9c0d1e2f3a4b' },
    principal: { kind: 'tenant', tenantId: 'acme', keyId: 'key-1' },
    headers: {},
    id: 'req-1',
  };
  return {
    getType: () => 'http',
    getHandler: () => handler,
    switchToHttp: () => ({ getRequest: () => req, getResponse: () => ({ statusCode }) }),
  } as unknown as ExecutionContext;
}

describe('AuditInterceptor', () => {
  const handler = Routes.prototype.revoke;

  it('writes one success row for an @Audited route, by the key, with the request id', async () => {
    const { service, rows } = auditService(false);
    const interceptor = new AuditInterceptor(new Reflector(), service);
    await expect(firstValueFrom(interceptor.intercept(contextFor(handler), { handle: () => of('answer') }))).resolves.toBe('answer');
    expect(rows).toEqual([
      {
        action: 'api_key.revoked',
        actor: { kind: 'tenant_key', id: 'key-1' },
        requestId: 'req-1',
        tenantId: 'acme',
        target: 'api-keys/3f1c2b4a-0d5e-4c6f-8a7b-9c0d1e2f3a4b',
        userId: null,
        outcome: 'success',
      },
    ]);
  });

  it('writes a failure row and passes the error on unchanged', async () => {
    const { service, rows } = auditService(false);
    const interceptor = new AuditInterceptor(new Reflector(), service);
    const refused = new AppError('api_key_not_found', 'No such API key.');
    await expect(firstValueFrom(interceptor.intercept(contextFor(handler), { handle: () => throwError(() => refused) }))).rejects.toBe(
      refused,
    );
    expect(rows.map((r) => r.outcome)).toEqual(['failure']);
  });

  it('never turns a success into a failure when the row cannot be written', async () => {
    const { service } = auditService(true);
    const interceptor = new AuditInterceptor(new Reflector(), service);
    await expect(firstValueFrom(interceptor.intercept(contextFor(handler, 204), { handle: () => of(undefined) }))).resolves.toBe(undefined);
  });

  it('leaves a route without @Audited alone', async () => {
    const { service, rows } = auditService(false);
    const interceptor = new AuditInterceptor(new Reflector(), service);
    await firstValueFrom(interceptor.intercept(contextFor(Routes.prototype.plain), { handle: () => of('x') }));
    expect(rows).toEqual([]);
  });
});
