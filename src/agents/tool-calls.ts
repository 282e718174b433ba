import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { FacadeDoor, upstreamCall } from '../facade/facade-door.js';
import { matchRoute, TENANT_PREFIX } from '../facade/facade-routes.js';
import { RoutingService } from '../routing/routing.service.js';
import { readAnswer, type ReadAnswer } from '../upstream/upstream-answers.js';
import { WebhooksService, type CreateWebhookInput } from '../webhooks/webhooks.service.js';
import type { AgentSession } from './agent-sessions.repository.js';
import type { ToolTarget } from './agent-tools.js';
import { answerOutcome, type ToolOutcome } from './tool-results.js';

/** The largest upstream answer a tool passes back (as the webhooks module reads its answers). */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** Seconds an agent refused for the tenant's bound is asked to wait (as the facade's callers). */
const RETRY_AFTER_SECONDS = 1;

/** Reports progress of a long tool call (MCP notifications/progress), when the caller asked for it. */
export type Progress = (progress: number, total: number, message: string) => Promise<void>;

/**
 * A tool's upstream call, on the facade's path: the route table turns the tool's operation into the upstream path
 * (upstreamCall, the same checks as a facade request), RoutingService.call picks the session user's connection and
 * its token (lane `agent`), and the tenant's bound of calls in flight (TenantLimits, shared with the facade) holds.
 * The session's token never leaves this service; the upstream's token never reaches the agent.
 */
@Injectable()
export class ToolCalls {
  constructor(
    private readonly routing: RoutingService,
    private readonly webhooksService: WebhooksService,
    private readonly door: FacadeDoor,
  ) {}

  async facade(
    session: AgentSession,
    target: Extract<ToolTarget, { kind: 'facade' }>,
    args: Record<string, unknown>,
  ): Promise<ToolOutcome> {
    let path = target.path;
    for (const name of target.params) path = path.replace(`{${name}}`, encodeURIComponent(String(args[name])));
    const query = args.query as Record<string, string> | undefined;
    return answerOutcome(await this.facadeAnswer(session, target.method, path, query, target.body ? (args.body ?? null) : null));
  }

  /** One facade operation for the session's user: `path` after /v1/tenants/{tenantId}, its segments already encoded. */
  async facadeAnswer(
    session: AgentSession,
    method: string,
    path: string,
    query: Record<string, string> | undefined,
    body: unknown,
  ): Promise<ReadAnswer> {
    const search = query && Object.keys(query).length ? `?${new URLSearchParams(query).toString()}` : '';
    const { match } = matchRoute(method, `${TENANT_PREFIX}${encodeURIComponent(session.tenantId)}${path}${search}`);
    if (match === null) throw new AppError('internal_error', `No facade route for ${method} ${path}.`);
    const call = upstreamCall(match);
    if (call.route === 'admin') throw new AppError('internal_error', 'A tool reached an admin path through the facade.');
    return this.bounded(session, async () => {
      const sent =
        call.route === 'userinfo' ? (await this.routing.resolve(session.tenantId, 'user', session.userId)).env.userinfoMethod : method;
      const withBody = body !== null && body !== undefined;
      const res = await this.routing.call(session.tenantId, 'user', session.userId, {
        method: sent,
        path: call.path,
        headers: withBody ? { accept: 'application/json', 'content-type': 'application/json' } : { accept: 'application/json' },
        body: withBody ? JSON.stringify(body) : null,
        retry: !withBody && (sent === 'GET' || sent === 'HEAD'),
        lane: 'agent',
      });
      return readAnswer(res, MAX_ANSWER_BYTES);
    });
  }

  /** The webhooks module's provisioning and listing, with the tenant's admin connection. */
  webhooks(session: AgentSession, op: 'create' | 'list', args: Record<string, unknown>): Promise<ToolOutcome> {
    return this.bounded(session, async () =>
      answerOutcome(
        op === 'create'
          ? await this.webhooksService.create(session.tenantId, args.body as CreateWebhookInput, 'agent')
          : await this.webhooksService.list(session.tenantId, 'agent'),
      ),
    );
  }

  private async bounded<T>(session: AgentSession, work: () => Promise<T>): Promise<T> {
    const release = this.door.limits.acquire(session.tenantId, false);
    if (release === null) {
      throw new AppError(
        'too_many_requests',
        'This tenant has too many calls in flight (FACADE_TENANT_MAX_IN_FLIGHT).',
        undefined,
        RETRY_AFTER_SECONDS,
      );
    }
    try {
      return await work();
    } finally {
      release();
    }
  }
}
