import { badRequest, readJson, SandboxHttpError, sendJson, sendRawJson } from './http-io.js';
import { readMultipart } from './multipart.js';
import { authenticate } from './resource-auth.js';
import type { SandboxCall, SandboxRuntime } from './sandbox-runtime.js';
import { approvalComment, signedDocuments, workflowFromJson, workflowFromMultipart } from './workflow-input.js';
import type { SandboxUser } from './user-directory.js';
import { decodeToken, type PageCursor } from './workflow-listing.js';
import type { NewWorkflow, WorkflowStep } from './workflow-store.js';
import { WORKFLOW_STEPS } from './workflow-store.js';

const READ = 'workflows.read';
const WRITE = 'workflows.write';

function notFound(): SandboxHttpError {
  return new SandboxHttpError(404, 'not_found', 'No such workflow');
}

/**
 * GET /workflows: what the token's user may see (spec 1 rule 4); `?step=` filters, other parameters are ignored.
 * Paged (the same `{"workflows"}` shape and a `Link` header) when the listing control sets a page size.
 */
export function handleListWorkflows(call: SandboxCall, rt: SandboxRuntime): void {
  const principal = authenticate(call, rt, READ);
  if (!principal) return;
  const { pageSize } = rt.listing;
  if (pageSize !== null) return listPage(call, rt, principal.user, pageSize);
  let step: WorkflowStep | undefined;
  if (call.rawQuery !== '') step = stepParam(new URLSearchParams(call.rawQuery));
  call.record.outcome = 'ok';
  sendRawJson(call.res, 200, rt.workflows.listJson(principal.user, step));
}

function stepParam(query: URLSearchParams): WorkflowStep | undefined {
  const value = query.get('step');
  if (value === null) return undefined;
  if (!WORKFLOW_STEPS.includes(value as WorkflowStep)) throw badRequest('invalid_step', `step must be one of ${WORKFLOW_STEPS.join(', ')}`);
  return value as WorkflowStep;
}

/** One page of a paged listing: `?page=` is a token of a Link header this sandbox sent (it carries the step filter). */
function listPage(call: SandboxCall, rt: SandboxRuntime, user: SandboxUser, pageSize: number): void {
  const query = new URLSearchParams(call.rawQuery);
  const step = stepParam(query);
  const tokens = query.getAll('page');
  let cursor: PageCursor = { page: 1, from: 0, step };
  if (tokens.length > 0) {
    const decoded = tokens.length === 1 ? decodeToken(tokens[0]) : null;
    if (!decoded || decoded.from > rt.workflows.size || (query.has('step') && step !== decoded.step))
      throw badRequest('invalid_page', 'page must be the token of a Link rel="next" this sandbox answered (with its step, if any)');
    cursor = decoded;
  }
  const failure = rt.listing.takeFailure(cursor.page);
  if (failure !== null) {
    call.record.outcome = 'listing_fault';
    sendJson(call.res, failure, {
      error: 'sandbox_fault',
      error_description: `Injected listing fault: page ${cursor.page} answers ${failure}`,
    });
    return;
  }
  const page = rt.workflows.listPage(user, cursor.step, cursor.from, pageSize);
  call.record.outcome = 'ok';
  const headers =
    page.next === null ? undefined : { link: rt.listing.nextLink({ page: cursor.page + 1, from: page.next, step: cursor.step }) };
  sendRawJson(call.res, 200, page.json, headers);
}

/** GET /workflows/{id}: 404 also when the workflow exists but the user may not see it (no existence leak). */
export function handleGetWorkflow(call: SandboxCall, rt: SandboxRuntime, id: string): void {
  const principal = authenticate(call, rt, READ);
  if (!principal) return;
  const workflow = rt.workflows.getVisible(id, principal.user);
  if (!workflow) throw notFound();
  call.record.outcome = 'ok';
  sendRawJson(call.res, 200, rt.workflows.json(workflow));
}

/** POST /workflows (201, the workflow) and POST /workflows/async (202, then created on the next turn). */
export async function handleCreateWorkflow(call: SandboxCall, rt: SandboxRuntime, asynchronous: boolean): Promise<void> {
  const principal = authenticate(call, rt, WRITE);
  if (!principal) return;
  let input: NewWorkflow;
  if (call.mediaType === 'multipart/form-data') {
    input = workflowFromMultipart(await readMultipart(call.req), rt.users);
  } else if (call.mediaType === 'application/json') {
    input = workflowFromJson(await readJson(call.req), rt.users);
  } else {
    throw new SandboxHttpError(415, 'unsupported_media_type', 'The body must be application/json or multipart/form-data');
  }
  call.record.outcome = 'ok';
  if (!asynchronous) {
    const workflow = rt.workflows.create(input, principal.user);
    sendRawJson(call.res, 201, rt.workflows.json(workflow));
    return;
  }
  const id = rt.workflows.newId();
  setImmediate(() => rt.workflows.create(input, principal.user, id));
  sendJson(call.res, 202, { id, status: 'accepted' });
}

/** PATCH /workflows/{id}/approvals: the token's user approves their own pending approval, nobody else's. */
export async function handleApprove(call: SandboxCall, rt: SandboxRuntime, id: string): Promise<void> {
  const principal = authenticate(call, rt, WRITE);
  if (!principal) return;
  let body: unknown;
  let bodyError: SandboxHttpError | undefined;
  try {
    body = await readJson(call.req);
  } catch (e) {
    if (!(e instanceof SandboxHttpError)) throw e;
    bodyError = e;
  }
  if (!rt.workflows.getVisible(id, principal.user)) throw notFound();
  if (bodyError) throw bodyError;
  const result = rt.workflows.approve(id, principal.user, approvalComment(body));
  if (!result.ok) {
    if (result.reason === 'not_found') throw notFound();
    throw new SandboxHttpError(403, 'no_pending_approval', 'The token’s user holds no pending approval on this workflow');
  }
  call.record.outcome = 'ok';
  sendRawJson(call.res, 200, rt.workflows.json(result.workflow));
}

/** POST /workflows/{id}/upload-signed: multipart only, and only while the workflow is in the Sign step (spec 3 rule 4). */
export async function handleUploadSigned(call: SandboxCall, rt: SandboxRuntime, id: string): Promise<void> {
  const principal = authenticate(call, rt, WRITE);
  if (!principal) return;
  const workflow = rt.workflows.getVisible(id, principal.user);
  if (!workflow) throw notFound();
  if (call.mediaType !== 'multipart/form-data') {
    throw new SandboxHttpError(415, 'unsupported_media_type', 'A signed document is uploaded as multipart/form-data');
  }
  const notInSign = () =>
    new SandboxHttpError(
      409,
      'workflow_not_in_sign_step',
      `The workflow is in the ${workflow.step} step; signed documents are accepted only in Sign`,
    );
  if (workflow.step !== 'Sign') throw notInSign();
  const documents = signedDocuments(await readMultipart(call.req));
  // The step may have moved while the upload streamed in.
  if (workflow.step !== 'Sign') throw notInSign();
  rt.workflows.addSignedDocuments(workflow, documents, principal.user);
  call.record.outcome = 'ok';
  sendRawJson(call.res, 200, rt.workflows.json(workflow));
}
