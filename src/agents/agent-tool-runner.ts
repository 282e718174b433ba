import { Injectable, Logger } from '@nestjs/common';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { AuditService } from '../audit/audit.service.js';
import { AppError } from '../common/app-error.js';
import { ATTR } from '../telemetry/tracing.js';
import { currentTraceId, inSpan } from '../telemetry/operation-spans.js';
import { ConnectLinks } from './connect-links.js';
import type { AgentSession } from './agent-sessions.repository.js';
import type { AgentTool } from './agent-tools.js';
import { AgentToolCatalogue } from './agent-tool-catalogue.js';
import { LAUNCH_AND_WAIT } from './composed-tools.js';
import { LaunchAndWait } from './launch-and-wait.js';
import { RecordTools } from './record-tools.js';
import { ToolCalls, type Progress } from './tool-calls.js';
import { errorResult, failureOutcome, type ToolOutcome } from './tool-results.js';

const logger = new Logger('AgentToolRunner');

export interface ToolCallContext {
  requestId: string;
  signal: AbortSignal;
  progress: Progress | null;
}

/**
 * Runs one tool call of an agent session: the grant, the arguments, then the call on the same path as the facade's
 * (ToolCalls: RoutingService.call with the session user's token, the admin's for admin tools, the tenant's bounds),
 * inside a span, with one audit row (the tool, the session, the user, the outcome and status, the request and trace
 * ids; never the arguments nor the answer). Every failure is a tool result with isError, except one: a user who must
 * connect, whose MCP client declared URL elicitation, is asked through it (URLElicitationRequiredError).
 */
@Injectable()
export class AgentToolRunner {
  constructor(
    private readonly catalogue: AgentToolCatalogue,
    private readonly calls: ToolCalls,
    private readonly launchAndWait: LaunchAndWait,
    private readonly recordTools: RecordTools,
    private readonly links: ConnectLinks,
    private readonly audit: AuditService,
  ) {}

  async run(session: AgentSession, name: string, args: unknown, ctx: ToolCallContext): Promise<ToolOutcome['result']> {
    const tool = this.catalogue.get(name);
    if (tool === undefined || !session.tools.includes(name)) {
      // Not in the grant: the same answer as an unknown tool, so a session learns nothing of what it was not given.
      const outcome = {
        status: 404,
        result: errorResult(`No tool named "${name.slice(0, 100)}" in this session (tools/list names them).`),
      };
      await this.record(session, name, outcome, ctx);
      return outcome.result;
    }
    let elicitation: UrlElicitationRequiredError | null = null;
    const outcome = await inSpan(
      'agent.tool_call',
      { [ATTR.tenant]: session.tenantId, 'cws.agent.session': session.id, 'cws.agent.tool': name },
      async () => {
        const problem = this.catalogue.check(name, args ?? {});
        if (problem !== null) return { status: 400, result: errorResult(`The arguments do not fit the tool's input schema: ${problem}.`) };
        try {
          return await this.execute(session, tool, (args ?? {}) as Record<string, unknown>, ctx);
        } catch (e) {
          const connectUrl = await this.connectUrlFor(session, e);
          if (connectUrl !== null && session.urlElicitation) elicitation = this.elicit(session, e as AppError, connectUrl);
          const failed = failureOutcome(e, connectUrl);
          if (failed.status >= 500) logger.error({ err: e instanceof Error ? e.message : String(e), tool: name }, 'tool call failed');
          return failed;
        }
      },
    );
    await this.record(session, name, outcome, ctx);
    if (elicitation !== null) throw elicitation;
    return outcome.result;
  }

  private execute(session: AgentSession, tool: AgentTool, args: Record<string, unknown>, ctx: ToolCallContext): Promise<ToolOutcome> {
    const target = tool.target;
    if (target.kind === 'facade') return this.calls.facade(session, target, args);
    if (target.kind === 'webhooks') return this.calls.webhooks(session, target.op, args);
    if (target.kind === 'records') return this.recordTools.run(session, target.op, args);
    if (target.name === LAUNCH_AND_WAIT) return this.launchAndWait.run(session, args, ctx.signal, ctx.progress);
    throw new AppError('internal_error', `No runner for the tool ${tool.name}.`);
  }

  private async connectUrlFor(session: AgentSession, e: unknown): Promise<string | null> {
    if (!(e instanceof AppError) || (e.code !== 'user_not_connected' && e.code !== 'reauth_required')) return null;
    return this.links.forSession(session);
  }

  private elicit(session: AgentSession, e: AppError, url: string): UrlElicitationRequiredError {
    const message =
      e.code === 'user_not_connected'
        ? 'Connect your CWS account so that the assistant can act for you.'
        : 'Authorize CWS access again so that the assistant can act for you.';
    return new UrlElicitationRequiredError([{ mode: 'url', message, url, elicitationId: `connect-${session.id}` }]);
  }

  private record(session: AgentSession, name: string, outcome: ToolOutcome, ctx: ToolCallContext): Promise<void> {
    return this.audit.recordGrouped({
      action: 'agent.tool_call',
      actor: { kind: 'agent_session', id: session.id },
      tenantId: session.tenantId,
      // The name an agent sent is copied only when it names a tool of this service: the row holds no text of the caller's.
      target: this.catalogue.get(name) ? `tools/${name}` : null,
      userId: session.userId,
      requestId: ctx.requestId,
      outcome: outcome.result.isError ? 'failure' : 'success',
      status: outcome.status,
      traceId: currentTraceId(),
    });
  }
}
