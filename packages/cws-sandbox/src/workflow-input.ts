import { badRequest, isPlainObject, parseHttpUrl, type SandboxHttpError } from './http-io.js';
import type { MultipartBody, UploadedFile } from './multipart.js';
import type { UserDirectory } from './user-directory.js';
import type { NewWorkflow, StoredDocument } from './workflow-store.js';

// Spec 1 rule 4: the token's user is the creator and the approver; a body never names them.
const CREATOR_FIELDS = new Set(['creator', 'creatorid', 'creator_id', 'createdby', 'created_by', 'owner', 'ownerid', 'owner_id']);
const APPROVER_FIELDS = new Set(['approver', 'approverid', 'approver_id', 'userid', 'user_id', 'user', 'approvedby', 'approved_by']);
const WORKFLOW_FIELDS = new Set(['name', 'approvers', 'documents', 'attributes']);
const NAME_MAX = 500;
const COMMENT_MAX = 2000;

/** Body of POST /workflows and /workflows/async as JSON (fields beyond the upload option are the sandbox's own). */
export function workflowFromJson(body: unknown, users: UserDirectory): NewWorkflow {
  if (!isPlainObject(body)) throw badRequest('invalid_body', 'The body must be a JSON object');
  for (const key of Object.keys(body)) rejectField(key, WORKFLOW_FIELDS);
  const documents: StoredDocument[] = [];
  if (body.documents !== undefined) {
    if (!Array.isArray(body.documents)) throw badRequest('invalid_documents', 'documents must be an array of {url, name?}');
    for (const doc of body.documents) documents.push(hostedDocument(doc));
  }
  return {
    name: workflowName(body.name),
    approvers: approverIds(body.approvers, users),
    documents,
    attributes: attributesOf(body.attributes),
  };
}

/** Body of POST /workflows and /workflows/async as multipart: fields name, approvers (repeated), attributes (JSON); file parts are documents. */
export function workflowFromMultipart(body: MultipartBody, users: UserDirectory): NewWorkflow {
  rejectProblems(body);
  let name: unknown;
  let attributes: unknown;
  const approvers: string[] = [];
  for (const field of body.fields) {
    rejectField(field.name, WORKFLOW_FIELDS);
    if (field.name === 'documents') throw badRequest('unknown_field', 'documents are uploaded as file parts in a multipart body');
    if (field.name === 'approvers') {
      approvers.push(field.value);
    } else if (field.name === 'name') {
      if (name !== undefined) throw badRequest('invalid_name', 'name is given more than once');
      name = field.value;
    } else {
      if (attributes !== undefined) throw badRequest('invalid_attributes', 'attributes is given more than once');
      try {
        attributes = JSON.parse(field.value) as unknown;
      } catch {
        throw badRequest('invalid_attributes', 'attributes must be a JSON object');
      }
    }
  }
  return {
    name: workflowName(name),
    approvers: approverIds(approvers, users),
    documents: body.files.map(uploadedDocument),
    attributes: attributesOf(attributes),
  };
}

/** Body of PATCH /workflows/{id}/approvals: optional, at most `{comment}`. */
export function approvalComment(body: unknown): string | undefined {
  if (body === undefined) return undefined;
  if (!isPlainObject(body)) throw badRequest('invalid_body', 'The body must be a JSON object');
  for (const key of Object.keys(body)) {
    if (APPROVER_FIELDS.has(key.toLowerCase())) {
      throw badRequest('approver_not_allowed', `${key} is not accepted: the approval is made on behalf of the token's user only`);
    }
    if (key !== 'comment') throw badRequest('unknown_field', `${key} is not a known field`);
  }
  if (body.comment === undefined) return undefined;
  if (typeof body.comment !== 'string' || body.comment.length > COMMENT_MAX) {
    throw badRequest('invalid_comment', `comment must be a string of at most ${COMMENT_MAX} characters`);
  }
  return body.comment;
}

/** POST /workflows/{id}/upload-signed: file parts only. */
export function signedDocuments(body: MultipartBody): StoredDocument[] {
  rejectProblems(body);
  const field = body.fields[0];
  if (field) {
    if (CREATOR_FIELDS.has(field.name.toLowerCase())) throw creatorRefused(field.name);
    throw badRequest('unknown_field', `${field.name} is not accepted: upload-signed takes file parts only`);
  }
  if (body.files.length === 0) throw badRequest('no_document', 'At least one file part is required');
  return body.files.map(uploadedDocument);
}

function rejectProblems(body: MultipartBody): void {
  if (body.problems.length) throw badRequest('multipart_limit', `The multipart body exceeds a limit: ${body.problems.join('; ')}`);
}

function rejectField(key: string, allowed: ReadonlySet<string>): void {
  if (CREATOR_FIELDS.has(key.toLowerCase())) throw creatorRefused(key);
  if (!allowed.has(key)) throw badRequest('unknown_field', `${key} is not a known field`);
}

function creatorRefused(key: string): SandboxHttpError {
  return badRequest('creator_not_allowed', `${key} is not accepted: the token's user is the creator`);
}

function workflowName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > NAME_MAX) {
    throw badRequest('invalid_name', `name is required: a non-empty string of at most ${NAME_MAX} characters`);
  }
  return value;
}

function approverIds(value: unknown, users: UserDirectory): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === 'string')) {
    throw badRequest('invalid_approvers', 'approvers must be an array of user ids');
  }
  if (new Set(value).size !== value.length) throw badRequest('invalid_approvers', 'approvers holds a duplicate');
  const unknown = value.filter((id) => !users.has(id));
  if (unknown.length) throw badRequest('unknown_approver', `Unknown approver ids: ${unknown.join(', ')}`);
  return value;
}

function attributesOf(value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw badRequest('invalid_attributes', 'attributes must be a JSON object');
  return value;
}

function hostedDocument(value: unknown): StoredDocument {
  if (!isPlainObject(value)) throw badRequest('invalid_documents', 'Each document must be an object {url, name?}');
  for (const key of Object.keys(value)) {
    if (key !== 'url' && key !== 'name') throw badRequest('invalid_documents', `Document field ${key} is not known`);
  }
  const url = typeof value.url === 'string' ? parseHttpUrl(value.url) : null;
  if (!url) throw badRequest('invalid_documents', 'Each document needs url: an absolute http(s) URL');
  const given = value.name;
  if (given !== undefined && (typeof given !== 'string' || given === '')) {
    throw badRequest('invalid_documents', 'A document name must be a non-empty string');
  }
  const name = typeof given === 'string' ? given : lastSegment(url) || url.hostname;
  return { name, size: null, sha256: null, contentType: null, url: url.href };
}

function lastSegment(url: URL): string {
  const segment = url.pathname.split('/').pop() ?? '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function uploadedDocument(file: UploadedFile): StoredDocument {
  return { name: file.fileName, size: file.size, sha256: file.sha256, contentType: file.contentType };
}
