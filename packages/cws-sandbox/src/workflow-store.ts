import { randomUUID } from 'node:crypto';
import type { Clock } from './types.js';
import type { SandboxUser } from './user-directory.js';

export type WorkflowStep = 'Create' | 'Review' | 'Sign' | 'Archive';
export const WORKFLOW_STEPS: readonly WorkflowStep[] = ['Create', 'Review', 'Sign', 'Archive'];

export interface StoredDocument {
  readonly name: string;
  /** null for a document given as a hosted URL: the sandbox records the URL and never fetches it. */
  readonly size: number | null;
  readonly sha256: string | null;
  readonly contentType: string | null;
  readonly url?: string;
}

export interface Approval {
  readonly userId: string;
  status: 'pending' | 'approved';
  approvedAt?: string;
  comment?: string;
}

/** Spec 2.4: "several author types with differing information"; the sandbox has two. */
export type WorkflowAuthor =
  | { readonly type: 'user'; readonly id: string; readonly email: string; readonly name: string }
  | { readonly type: 'system'; readonly name: string };

export interface Workflow {
  readonly id: string;
  readonly name: string;
  step: WorkflowStep;
  readonly creator: { readonly id: string; readonly email: string; readonly name: string };
  readonly approvers: Approval[];
  readonly documents: StoredDocument[];
  readonly signedDocuments: StoredDocument[];
  readonly attributes: Record<string, unknown>;
  versionNumber: number;
  lastModified: string;
  Author: WorkflowAuthor;
  readonly createdAt: string;
}

export interface NewWorkflow {
  readonly name: string;
  readonly approvers: readonly string[];
  readonly documents: readonly StoredDocument[];
  readonly attributes: Readonly<Record<string, unknown>>;
}

export type WorkflowEvent =
  | { readonly kind: 'workflow_step_updated'; readonly workflow: Workflow; readonly transition: WorkflowStep }
  | {
      readonly kind: 'workflow_attribute_updated';
      readonly workflow: Workflow;
      readonly attribute: { readonly name: string; readonly value: unknown };
    };

export type ApprovalResult =
  { readonly ok: true; readonly workflow: Workflow } | { readonly ok: false; readonly reason: 'not_found' | 'no_pending_approval' };

const CONTROL_AUTHOR: WorkflowAuthor = Object.freeze({ type: 'system', name: 'sandbox control' });

interface Entry {
  readonly workflow: Workflow;
  /** Serialized form, rebuilt only after a change: GET /workflows is the proxy benchmark's hot path. */
  json: string | null;
}

export class WorkflowStore {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    private readonly onEvent: (event: WorkflowEvent) => void,
  ) {}

  newId(): string {
    return `wf_${randomUUID()}`;
  }

  create(input: NewWorkflow, creator: SandboxUser, id = this.newId()): Workflow {
    const now = new Date(this.clock()).toISOString();
    // A null prototype, so that an attribute named __proto__ is stored as data like any other.
    const attributes: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const [name, value] of Object.entries(input.attributes)) attributes[name] = value;
    const workflow: Workflow = {
      id,
      name: input.name,
      step: 'Create',
      creator: { id: creator.id, email: creator.email, name: creator.name },
      approvers: input.approvers.map((userId) => ({ userId, status: 'pending' })),
      documents: [...input.documents],
      signedDocuments: [],
      attributes,
      versionNumber: 1,
      lastModified: now,
      Author: userAuthor(creator),
      createdAt: now,
    };
    this.entries.set(id, { workflow, json: null });
    return workflow;
  }

  exists(id: string): boolean {
    return this.entries.has(id);
  }

  /** Undefined when it does not exist or the user may not see it: callers answer 404 for both. */
  getVisible(id: string, user: SandboxUser): Workflow | undefined {
    const entry = this.entries.get(id);
    return entry && canSee(entry.workflow, user) ? entry.workflow : undefined;
  }

  /** `{"workflows":[...]}` of what the user may see, optionally in one step. */
  listJson(user: SandboxUser, step?: WorkflowStep): string {
    const parts: string[] = [];
    for (const entry of this.entries.values()) {
      if ((step === undefined || entry.workflow.step === step) && canSee(entry.workflow, user)) parts.push(this.jsonOf(entry));
    }
    return `{"workflows":[${parts.join(',')}]}`;
  }

  json(workflow: Workflow): string {
    const entry = this.entries.get(workflow.id);
    return entry ? this.jsonOf(entry) : JSON.stringify(workflow);
  }

  approve(id: string, user: SandboxUser, comment: string | undefined): ApprovalResult {
    const workflow = this.getVisible(id, user);
    if (!workflow) return { ok: false, reason: 'not_found' };
    const approval = workflow.approvers.find((a) => a.userId === user.id && a.status === 'pending');
    if (!approval) return { ok: false, reason: 'no_pending_approval' };
    approval.status = 'approved';
    approval.approvedAt = new Date(this.clock()).toISOString();
    if (comment !== undefined) approval.comment = comment;
    this.touch(workflow, userAuthor(user));
    return { ok: true, workflow };
  }

  addSignedDocuments(workflow: Workflow, documents: readonly StoredDocument[], user: SandboxUser): void {
    workflow.signedDocuments.push(...documents);
    this.touch(workflow, userAuthor(user));
  }

  /** Test control: any step may follow any other; setting the current step again changes nothing. */
  setStep(id: string, step: WorkflowStep): Workflow {
    const workflow = this.require(id);
    if (workflow.step === step) return workflow;
    workflow.step = step;
    this.touch(workflow, CONTROL_AUTHOR);
    this.onEvent({ kind: 'workflow_step_updated', workflow, transition: step });
    return workflow;
  }

  setAttribute(id: string, name: string, value: unknown): Workflow {
    const workflow = this.require(id);
    workflow.attributes[name] = value;
    this.touch(workflow, CONTROL_AUTHOR);
    this.onEvent({ kind: 'workflow_attribute_updated', workflow, attribute: { name, value } });
    return workflow;
  }

  private require(id: string): Workflow {
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`unknown workflow ${id}`);
    return entry.workflow;
  }

  private touch(workflow: Workflow, author: WorkflowAuthor): void {
    workflow.versionNumber++;
    workflow.lastModified = new Date(this.clock()).toISOString();
    workflow.Author = author;
    const entry = this.entries.get(workflow.id);
    if (entry) entry.json = null;
  }

  private jsonOf(entry: Entry): string {
    return (entry.json ??= JSON.stringify(entry.workflow));
  }
}

export function canSee(workflow: Workflow, user: SandboxUser): boolean {
  return user.isAdmin || workflow.creator.id === user.id || workflow.approvers.some((a) => a.userId === user.id);
}

function userAuthor(user: SandboxUser): WorkflowAuthor {
  return { type: 'user', id: user.id, email: user.email, name: user.name };
}
