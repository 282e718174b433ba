import { Inject, Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppConfig } from '../config/app-config.js';
import { APP_CONFIG } from '../config/config.module.js';
import type { ReadAnswer } from '../upstream/upstream-answers.js';
import type { AgentSession } from './agent-sessions.repository.js';
import { POLL_INTERVAL_MS, reached, WORKFLOW_STEPS, type WorkflowStep } from './composed-tools.js';
import { ToolCalls, type Progress } from './tool-calls.js';
import { answerOutcome, errorResult, type ToolOutcome } from './tool-results.js';

/**
 * The composed tool `launchWorkflowAndWait`: a launch (facadeLaunchWorkflow's call), then reads of the workflow
 * (facadeGetWorkflow's) until it is at the step asked for or past it. The spec shows neither the workflow's id nor
 * its step field: both are named by configuration (AGENT_WORKFLOW_ID_FIELD, AGENT_WORKFLOW_STEP_FIELD).
 */
@Injectable()
export class LaunchAndWait {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly calls: ToolCalls,
  ) {}

  async run(session: AgentSession, args: Record<string, unknown>, signal: AbortSignal, progress: Progress | null): Promise<ToolOutcome> {
    const target = args.untilStep as WorkflowStep;
    const deadline = Date.now() + Number(args.timeoutSeconds ?? 60) * 1000;
    const { workflowIdField: idField, workflowStepField: stepField } = this.config.agents;
    const launched = await this.calls.facadeAnswer(session, 'POST', '/workflows', undefined, args.body);
    if (launched.status >= 400) return answerOutcome(launched);
    const id = fieldOf(launched, idField);
    if (typeof id !== 'string' && typeof id !== 'number') {
      return {
        status: 502,
        result: errorResult(
          `The workflow was launched, but its answer names no id in "${idField}" (AGENT_WORKFLOW_ID_FIELD): look for it with facadeListWorkflows.`,
        ),
      };
    }
    const path = `/workflows/${encodeURIComponent(String(id))}`;
    let current = launched;
    for (;;) {
      const step = fieldOf(current, stepField);
      if (progress !== null) {
        const at = WORKFLOW_STEPS.indexOf(step as WorkflowStep);
        await progress(
          at + 1,
          WORKFLOW_STEPS.indexOf(target) + 1,
          `Workflow ${id} is in ${typeof step === 'string' ? step : 'an unknown step'}.`,
        );
      }
      if (reached(step, target)) return answerOutcome(current);
      if (Date.now() + POLL_INTERVAL_MS > deadline || signal.aborted) {
        return {
          status: 408,
          result: errorResult(
            `Workflow ${id} was launched and is in ${typeof step === 'string' ? step : 'an unknown step'}, not yet ${target}. Call facadeGetWorkflow with workflowId ${id} later.`,
          ),
        };
      }
      await sleep(POLL_INTERVAL_MS, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) continue;
      current = await this.calls.facadeAnswer(session, 'GET', path, undefined, null);
      if (current.status >= 400) return answerOutcome(current);
    }
  }
}

function fieldOf(answer: ReadAnswer, field: string): unknown {
  const body = answer.body;
  return body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[field] : undefined;
}
