import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { TenantsService } from '../tenants/tenants.service.js';
import { ConnectSessionsRepository } from './connect-sessions.repository.js';
import { returnUrlAllowed } from './connect.service.js';
import { completionPage, type PopupOutcome } from './connect-completion-page.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CODE = /^[a-z_]{1,64}$/;

/**
 * The completion page of a connect flow run in a popup by the browser module. It posts the outcome to the
 * window that opened the popup, addressed to the origin of the session's returnUrl only, and only while that
 * origin is still one of the tenant's allowedReturnUrls: a page of any other origin that opened the flow
 * receives nothing.
 */
@Injectable()
export class ConnectPopupService {
  constructor(
    private readonly sessions: ConnectSessionsRepository,
    private readonly tenants: TenantsService,
  ) {}

  async completion(sessionId: string, query: Record<string, unknown>): Promise<{ html: string; nonce: string }> {
    const outcome = parseOutcome(query);
    const session = UUID.test(sessionId) ? await this.sessions.findInAnyTenant(sessionId) : null;
    if (!session) throw new AppError('connect_state_invalid', 'This connection is unknown or too old. Start the connection again.');
    const tenant = await this.tenants.get(session.tenantId);
    const allowed = tenant.allowedReturnUrls.some((a) => returnUrlAllowed(session.returnUrl, a));
    const nonce = randomBytes(16).toString('base64');
    const fallback = new URL(session.returnUrl);
    for (const [k, v] of Object.entries(outcome)) if (v !== undefined) fallback.searchParams.set(k, v);
    return {
      nonce,
      html: completionPage({
        outcome,
        nonce,
        target: allowed ? { origin: new URL(session.returnUrl).origin, fallbackUrl: fallback.toString() } : null,
      }),
    };
  }
}

function parseOutcome(query: Record<string, unknown>): PopupOutcome {
  const { status, connectionId, error } = query;
  const valid =
    (status === 'connected' || status === 'error') &&
    (connectionId === undefined || (typeof connectionId === 'string' && UUID.test(connectionId))) &&
    (error === undefined || (typeof error === 'string' && CODE.test(error))) &&
    (status === 'connected' ? typeof connectionId === 'string' && error === undefined : typeof error === 'string');
  if (!valid) throw new AppError('validation_failed', 'This completion link is malformed.');
  return {
    status,
    ...(connectionId ? { connectionId: connectionId as string } : {}),
    ...(error ? { error: error as string } : {}),
  } as PopupOutcome;
}
