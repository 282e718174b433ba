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
  /** Replaced, never pushed to: bulk workflows share one frozen empty array. */
  signedDocuments: StoredDocument[];
  /** Copied on the first write when frozen: bulk workflows share one frozen empty object. */
  attributes: Record<string, unknown>;
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
// Shared by bulk workflows, so that each costs only its own id, name and objects (about 300 bytes).
const NO_ITEMS: never[] = Object.freeze([]) as unknown as never[];
const NO_ATTRIBUTES: Record<string, unknown> = Object.freeze(Object.create(null) as Record<string, unknown>);

interface Entry {
  readonly workflow: Workflow;
  /** Serialized form, rebuilt only after a change: GET /workflows is the proxy benchmark's hot path. */
  json: string | null;
  /** Test control: user id → sees it (true) or not (false), overriding the rule of canSee; null when none. */
  sight: Map<string, boolean> | null;
}

/** One page of a listing walk: the workflows' JSON and the index to continue from (null: nothing remains). */
export interface ListedPage {
  readonly json: string;
  readonly next: number | null;
}

export class WorkflowStore {
  private readonly entries = new Map<string, Entry>();
  /** The entries in creation order (never removed): a page cursor is an index into it, stable under inserts. */
  private readonly ordered: Entry[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly onEvent: (event: WorkflowEvent) => void,
  ) {}

  newId(): string {
    // randomUUID's string is a tree of concatenated pieces (about 500 bytes on V8); parsing it as JSON gives one
    // flat string (about 65): it matters to 200,000 bulk workflows.
    return JSON.parse(`"wf_${randomUUID()}"`) as string;
  }

  create(input: NewWorkflow, creator: SandboxUser, id = this.newId()): Workflow {
    return this.insert(input, { id: creator.id, email: creator.email, name: creator.name }, userAuthor(creator), id, this.now());
  }

  /**
   * Test control: `count` workflows created by `creator` (no approvers, documents or attributes) in one go, sharing
   * their creator, Author and timestamp objects; no event. Returns the first and last ids.
   */
  bulkCreate(creator: SandboxUser, count: number): { firstId: string; lastId: string } {
    const now = this.now();
    const who = Object.freeze({ id: creator.id, email: creator.email, name: creator.name });
    const author = Object.freeze(userAuthor(creator));
    const first = this.ordered.length + 1;
    let firstId = '';
    let lastId = '';
    for (let i = 0; i < count; i++) {
      const id = this.newId();
      // The same property order as insert's, so that every workflow has one shape.
      const workflow: Workflow = {
        id,
        name: `Bulk workflow ${first + i}`,
        step: 'Create',
        creator: who,
        approvers: NO_ITEMS,
        documents: NO_ITEMS,
        signedDocuments: NO_ITEMS,
        attributes: NO_ATTRIBUTES,
        versionNumber: 1,
        lastModified: now,
        Author: author,
        createdAt: now,
      };
      const entry: Entry = { workflow, json: null, sight: null };
      this.entries.set(id, entry);
      this.ordered.push(entry);
      if (i === 0) firstId = id;
      lastId = id;
    }
    return { firstId, lastId };
  }

  get size(): number {
    return this.ordered.length;
  }

  private now(): string {
    return new Date(this.clock()).toISOString();
  }

  private insert(input: NewWorkflow, creator: Workflow['creator'], author: WorkflowAuthor, id: string, now: string): Workflow {
    // A null prototype, so that an attribute named __proto__ is stored as data like any other.
    const attributes: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const [name, value] of Object.entries(input.attributes)) attributes[name] = value;
    const workflow: Workflow = {
      id,
      name: input.name,
      step: 'Create',
      creator,
      approvers: input.approvers.map((userId) => ({ userId, status: 'pending' })),
      documents: [...input.documents],
      signedDocuments: [],
      attributes,
      versionNumber: 1,
      lastModified: now,
      Author: author,
      createdAt: now,
    };
    const entry: Entry = { workflow, json: null, sight: null };
    this.entries.set(id, entry);
    this.ordered.push(entry);
    return workflow;
  }

  exists(id: string): boolean {
    return this.entries.has(id);
  }

  /** Undefined when it does not exist or the user may not see it: callers answer 404 for both. */
  getVisible(id: string, user: SandboxUser): Workflow | undefined {
    const entry = this.entries.get(id);
    return entry && sees(entry, user) ? entry.workflow : undefined;
  }

  /** `{"workflows":[...]}` of what the user may see, optionally in one step. */
  listJson(user: SandboxUser, step?: WorkflowStep): string {
    const parts: string[] = [];
    for (const entry of this.entries.values()) {
      if ((step === undefined || entry.workflow.step === step) && sees(entry, user)) parts.push(this.jsonOf(entry));
    }
    return `{"workflows":[${parts.join(',')}]}`;
  }

  /**
   * `{"workflows": [...]}` (the unpaged answer's shape) with at most `pageSize` workflows the user may see (optionally in one step), in creation order,
   * starting at the index `from`; `next` is the index of the first one of the next page, null when none remains.
   */
  listPage(user: SandboxUser, step: WorkflowStep | undefined, from: number, pageSize: number): ListedPage {
    const parts: string[] = [];
    const { ordered } = this;
    for (let i = from; i < ordered.length; i++) {
      const entry = ordered[i];
      if ((step !== undefined && entry.workflow.step !== step) || !sees(entry, user)) continue;
      if (parts.length === pageSize) return { json: `{"workflows":[${parts.join(',')}]}`, next: i };
      parts.push(this.jsonOf(entry));
    }
    return { json: `{"workflows":[${parts.join(',')}]}`, next: null };
  }

  /**
   * Test control: the user sees the workflow (`true`) or not (`false`) whatever the rule of canSee says, until
   * set again. Not a change of the workflow: no version, no lastModified, no event.
   */
  setSight(id: string, userId: string, visible: boolean): void {
    const entry = this.entries.get(id);
    if (!entry) throw new Error(`unknown workflow ${id}`);
    (entry.sight ??= new Map()).set(userId, visible);
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
    workflow.signedDocuments = [...workflow.signedDocuments, ...documents];
    this.touch(workflow, userAuthor(user));
  }

  /**
   * Test control: any step may follow any other; setting the current step again changes nothing. A step change
   * is a new lastModified at the same versionNumber (the upstream may report a change that way).
   */
  setStep(id: string, step: WorkflowStep): Workflow {
    const workflow = this.require(id);
    if (workflow.step === step) return workflow;
    workflow.step = step;
    this.touch(workflow, CONTROL_AUTHOR, false);
    this.onEvent({ kind: 'workflow_step_updated', workflow, transition: step });
    return workflow;
  }

  setAttribute(id: string, name: string, value: unknown): Workflow {
    const workflow = this.require(id);
    if (Object.isFrozen(workflow.attributes))
      workflow.attributes = Object.assign(Object.create(null) as Record<string, unknown>, workflow.attributes);
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

  /** A change: a lastModified strictly later than the previous one (even when the clock has not moved), and a new version unless `bump` is false. */
  private touch(workflow: Workflow, author: WorkflowAuthor, bump = true): void {
    if (bump) workflow.versionNumber++;
    const previous = Date.parse(workflow.lastModified);
    workflow.lastModified = new Date(Math.max(this.clock(), previous + 1)).toISOString();
    workflow.Author = author;
    const entry = this.entries.get(workflow.id);
    if (entry) entry.json = null;
  }

  private jsonOf(entry: Entry): string {
    return (entry.json ??= JSON.stringify(entry.workflow));
  }
}

function sees(entry: Entry, user: SandboxUser): boolean {
  const { sight } = entry;
  if (sight === null) return canSee(entry.workflow, user);
  return sight.get(user.id) ?? canSee(entry.workflow, user);
}

/** The rule without the visibility control: the creator, the approvers and the company admin. */
export function canSee(workflow: Workflow, user: SandboxUser): boolean {
  return user.isAdmin || workflow.creator.id === user.id || workflow.approvers.some((a) => a.userId === user.id);
}

function userAuthor(user: SandboxUser): WorkflowAuthor {
  return { type: 'user', id: user.id, email: user.email, name: user.name };
}
