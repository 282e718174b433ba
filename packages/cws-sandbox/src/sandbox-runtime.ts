import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallRecorder } from './call-recorder.js';
import type { FaultController } from './fault-controller.js';
import type { PendingAuthorizations } from './pending-authorizations.js';
import type { QuotaMeter } from './quota-meter.js';
import type { SandboxConfig } from './types.js';
import type { SandboxCallRecord } from './types.js';
import type { TokenStore } from './token-store.js';
import type { UserDirectory } from './user-directory.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';
import type { WebhookStore } from './webhook-store.js';
import type { WorkflowListing } from './workflow-listing.js';
import type { WorkflowStore } from './workflow-store.js';

/** Everything a route handler may use; one per SandboxServer. */
export interface SandboxRuntime {
  readonly config: SandboxConfig;
  readonly users: UserDirectory;
  readonly tokens: TokenStore;
  readonly workflows: WorkflowStore;
  readonly webhooks: WebhookStore;
  readonly dispatcher: WebhookDispatcher;
  readonly recorder: CallRecorder;
  readonly faults: FaultController;
  readonly authorizations: PendingAuthorizations;
  readonly quotas: QuotaMeter;
  readonly listing: WorkflowListing;
}

/** One HTTP call being answered. */
export interface SandboxCall {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly path: string;
  readonly rawQuery: string;
  readonly mediaType: string | null;
  /** Mutable: handlers add what they learn (outcome, token user, grant family). */
  readonly record: SandboxCallRecord;
}
