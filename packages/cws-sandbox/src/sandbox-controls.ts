import { badRequest, SandboxHttpError } from './http-io.js';
import type { SandboxRuntime } from './sandbox-runtime.js';
import type { SandboxFault, SandboxListing, SandboxListingFailure } from './types.js';
import type { Workflow, WorkflowStep } from './workflow-store.js';
import { WORKFLOW_STEPS } from './workflow-store.js';

export const MAX_BULK = 200_000;

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

  /** Paging of GET /workflows from now on (see SandboxListing); answers the state as read back. */
  setListing(listing: SandboxListing): { pageSize: number | null; fail: SandboxListingFailure | null } {
    this.rt.listing.set(listing);
    return this.rt.listing.current();
  }

  /** The user sees the workflow (visible true) or not (false) from now on, whatever the creator/approver/admin rule says. */
  setWorkflowVisibility(workflowId: string, userId: string, visible: boolean): { workflowId: string; userId: string; visible: boolean } {
    if (typeof userId !== 'string' || !this.rt.users.has(userId)) throw badRequest('unknown_user', `No user ${String(userId)}`);
    if (typeof visible !== 'boolean') throw badRequest('invalid_body', 'visible must be true or false');
    this.rt.workflows.setSight(this.existing(workflowId), userId, visible);
    return { workflowId, userId, visible };
  }

  /** That share (0..1) of the webhook deliveries from now on is dropped (never sent; state `dropped`). */
  setWebhookDropRate(rate: number): { rate: number } {
    if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < 0 || rate > 1)
      throw badRequest('invalid_body', 'rate must be a number from 0 to 1');
    this.rt.dispatcher.setDropRate(rate);
    return { rate };
  }

  /** `count` (1..200000) workflows created by the user at once, in the Create step; no event. */
  bulkCreateWorkflows(userId: string, count: number): { created: number; firstId: string; lastId: string; total: number } {
    const user = typeof userId === 'string' ? this.rt.users.get(userId) : undefined;
    if (!user) throw badRequest('unknown_user', `No user ${String(userId)}`);
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_BULK)
      throw badRequest('invalid_body', `count must be a whole number from 1 to ${MAX_BULK}`);
    const { firstId, lastId } = this.rt.workflows.bulkCreate(user, count);
    return { created: count, firstId, lastId, total: this.rt.workflows.size };
  }

  private existing(workflowId: string): string {
    if (!this.rt.workflows.exists(workflowId)) throw new SandboxHttpError(404, 'not_found', `No workflow ${workflowId}`);
    return workflowId;
  }
}
