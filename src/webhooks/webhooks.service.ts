import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import { RoutingService, type Lane } from '../routing/routing.service.js';
import { readAnswer } from '../upstream/upstream-answers.js';
import type { ResourceResponse } from '../upstream/upstream.types.js';
import { TokenVault, type SealedRef } from '../vault/token-vault.service.js';
import { redactAuthorization } from './redaction.js';
import { WebhookReceiversRepository, type ReceiverAuth } from './webhook-receivers.repository.js';

export type { ReceiverAuth };
export const RECEIVER_AUTHS = ['bearer', 'apiKey', 'basic'] as const satisfies readonly ReceiverAuth[];

export interface CreateWebhookInput {
  events: string[];
  targetURL?: string;
  headers?: Record<string, unknown>;
  auth?: ReceiverAuth;
}

/** The upstream's answer, redacted, to pass back with its own status (API.md 3 and 8). */
export interface UpstreamAnswer {
  status: number;
  contentType: string | null;
  body: unknown;
}

const MAX_ANSWER_BYTES = 1024 * 1024;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,200}$/;
const BASIC_USER = 'cws-connect';

export function receiverRef(tenantId: string, id: string): SealedRef {
  return { table: 'webhook_receivers', id, column: 'secret_enc', tenantId };
}

/**
 * Webhook provisioning, always through the tenant's admin connection (spec 1 rule 5). The router refuses
 * an admin connection whose admin check failed (isAdmin false), so a non-admin token never reaches the
 * upstream's webhook endpoints; the validation here runs first, so bad input never costs an upstream call.
 */
@Injectable()
export class WebhooksService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly routing: RoutingService,
    private readonly receivers: WebhookReceiversRepository,
    private readonly vault: TokenVault,
  ) {}

  /** `lane`: who the call is for (an agent's tool call passes `agent`). */
  async create(tenantId: string, input: CreateWebhookInput, lane?: Lane): Promise<UpstreamAnswer> {
    const headers = this.checkHeaders(input.headers);
    if (input.targetURL !== undefined) {
      this.checkTargetUrl(input.targetURL);
      if (input.auth !== undefined)
        throw new AppError('validation_failed', 'auth applies only without targetURL (a webhook that delivers to this service).');
      await this.adminConnection(tenantId);
      const secrets = Object.entries(headers)
        .filter(([name]) => name.toLowerCase() === 'authorization')
        .map(([, v]) => v);
      return this.send(tenantId, 'POST', { events: input.events, targetURL: input.targetURL, headers }, secrets, lane);
    }

    if (Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) {
      throw new AppError('validation_failed', 'headers.Authorization is generated when targetURL is omitted; leave it out.');
    }
    await this.adminConnection(tenantId);
    const auth = input.auth ?? 'bearer';
    const id = randomUUID();
    const secret = randomBytes(32).toString('base64url');
    const authorization = authorizationValue(auth, secret);
    // Committed before the upstream call: once the upstream knows the webhook, its receiver must exist.
    await this.receivers.insert({
      id,
      tenantId,
      authMethod: auth,
      secretEnc: await this.vault.seal(authorization, receiverRef(tenantId, id)),
    });
    const targetURL = `${this.config.publicUrl}/inbound/${encodeURIComponent(tenantId)}/${id}`;
    let answer: UpstreamAnswer;
    try {
      answer = await this.send(
        tenantId,
        'POST',
        { events: input.events, targetURL, headers: { ...headers, Authorization: authorization } },
        [authorization, secret],
        lane,
      );
    } catch (e) {
      await this.receivers.deleteInTenant(tenantId, id);
      throw e;
    }
    if (answer.status < 200 || answer.status >= 300) await this.receivers.deleteInTenant(tenantId, id);
    return answer;
  }

  async list(tenantId: string, lane?: Lane): Promise<UpstreamAnswer> {
    await this.adminConnection(tenantId);
    return this.send(tenantId, 'GET', undefined, [], lane);
  }

  private async adminConnection(tenantId: string): Promise<void> {
    await this.routing.resolve(tenantId, 'admin', undefined);
  }

  private async send(tenantId: string, method: 'GET' | 'POST', body: unknown, secrets: string[], lane?: Lane): Promise<UpstreamAnswer> {
    const res = await this.routing.call(tenantId, 'admin', undefined, {
      ...(lane && { lane }),
      method,
      path: '/webhooks',
      headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
      retry: method === 'GET',
      lane: 'background',
    });
    return readRedacted(res, secrets);
  }

  private checkTargetUrl(raw: string): void {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new AppError('validation_failed', 'targetURL must be an absolute URL.');
    }
    const local = url.hostname === 'localhost' || url.hostname === '127.0.0.1';
    if (url.protocol === 'https:' || (url.protocol === 'http:' && local && !this.config.production)) return;
    throw new AppError(
      'validation_failed',
      this.config.production
        ? 'targetURL must be an https URL.'
        : 'targetURL must be an https URL (http is allowed only for localhost and 127.0.0.1 outside production).',
    );
  }

  private checkHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers ?? {})) {
      if (!HEADER_NAME.test(name)) throw new AppError('validation_failed', `headers: "${name.slice(0, 100)}" is not a valid header name.`);
      // The value is not echoed: it may be a credential.
      if (typeof value !== 'string' || /[\0\r\n]/.test(value) || value.length > 8192)
        throw new AppError('validation_failed', `headers: the value of "${name}" must be a string (one line).`);
      out[name] = value;
    }
    return out;
  }
}

function authorizationValue(auth: ReceiverAuth, secret: string): string {
  if (auth === 'apiKey') return secret;
  if (auth === 'basic') return `Basic ${Buffer.from(`${BASIC_USER}:${secret}`, 'utf8').toString('base64')}`;
  return `Bearer ${secret}`;
}

async function readRedacted(res: ResourceResponse, secrets: string[]): Promise<UpstreamAnswer> {
  // Not the raw text: it holds what the redaction removes.
  const { status, contentType, body } = await readAnswer(res, MAX_ANSWER_BYTES);
  return { status, contentType, body: redactAuthorization(body, secrets) };
}
