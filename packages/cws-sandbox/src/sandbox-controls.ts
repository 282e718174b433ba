import { badRequest, SandboxHttpError } from './http-io.js';
import type { SandboxRuntime } from './sandbox-runtime.js';
import type { SandboxFault } from './types.js';
import type { Workflow, WorkflowStep } from './workflow-store.js';
import { WORKFLOW_STEPS } from './workflow-store.js';

export interface IssuedTokens {
  access_token: string;
  refresh_token: string;
  expiresIn: number;
  scope: string[];
  family: string;
}

/** Test and benchmark controls, shared by the SandboxServer methods and the /_sandbox/ HTTP routes. */
export class SandboxControls {
  constructor(private readonly rt: SandboxRuntime) {}

  issueTokens(userId: string, scopes?: string[]): IssuedTokens {
    const { config, users, tokens } = this.rt;
    if (typeof userId !== 'string' || !users.has(userId)) throw badRequest('unknown_user', `No user ${String(userId)}`);
    const granted = scopes ?? [...config.scopes];
    if (
      !Array.isArray(granted) ||
      granted.length === 0 ||
      new Set(granted).size !== granted.length ||
      !granted.every((s) => config.scopeSet.has(s))
    ) {
      throw badRequest('invalid_scope', 'scopes must be a non-empty, duplicate-free subset of the registered scopes');
    }
    const issued = tokens.issue(userId, granted);
    return {
      access_token: issued.accessToken,
      refresh_token: issued.refreshToken,
      expiresIn: config.accessTokenTtlSeconds,
      scope: [...issued.scopes],
      family: issued.familyId,
    };
  }

  expireAccessTokens(filter: { userId?: string; accessToken?: string } = {}): number {
    return this.rt.tokens.expireAccess(filter);
  }

  revokeUser(userId: string): number {
    return this.rt.tokens.revokeUser(userId);
  }

  setFault(fault: SandboxFault | null): void {
    this.rt.faults.set(fault);
  }

  setWorkflowStep(workflowId: string, step: WorkflowStep): Workflow {
    if (!WORKFLOW_STEPS.includes(step)) throw badRequest('invalid_step', `step must be one of ${WORKFLOW_STEPS.join(', ')}`);
    return this.rt.workflows.setStep(this.existing(workflowId), step);
  }

  setWorkflowAttribute(workflowId: string, name: string, value: unknown): Workflow {
    if (typeof name !== 'string' || name === '') throw badRequest('invalid_attribute', 'An attribute name is a non-empty string');
    return this.rt.workflows.setAttribute(this.existing(workflowId), name, value);
  }

  private existing(workflowId: string): string {
    if (!this.rt.workflows.exists(workflowId)) throw new SandboxHttpError(404, 'not_found', `No workflow ${workflowId}`);
    return workflowId;
  }
}
