import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { RecordsService } from '../records/records.service.js';
import type { AgentSession } from './agent-sessions.repository.js';
import type { AgentTool } from './agent-tools.js';
import type { ToolOutcome } from './tool-results.js';

// Read tools over the synced copy (docs/records.md): the session user's workflows as last listed, read through the
// records module, never from the upstream (no call, no budget spent). Only the session's user: no userId argument.

export const RECORDS_LIST = 'recordsListWorkflows';
export const RECORDS_GET = 'recordsGetWorkflow';
const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

const RECORD_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    data: { type: 'object', additionalProperties: true, description: "The upstream's workflow object, as the user's own token listed it." },
    version: { type: ['integer', 'null'] },
    lastModified: { type: ['string', 'null'] },
    syncedAt: { type: 'string', description: 'When this record was last written in the copy.' },
  },
  required: ['id', 'data'],
};
const AS_OF = { type: 'string', description: "When the user's copy was last listed whole (their sync state's lastListedAt)." };
const ANNOTATIONS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

/** The tools over the copy, in the read group. */
export function recordTools(): AgentTool[] {
  const listTitle = "List the user's workflows from the synced copy";
  const getTitle = "Read one of the user's workflows from the synced copy";
  const copy =
    "Reads the copy cws-connect keeps of the session user's workflows (no call to CWS, so it is fast and works when CWS is down), " +
    'as of its last complete listing (`asOf` in the result): for the latest state read CWS with facadeListWorkflows / facadeGetWorkflow.';
  return [
    {
      name: RECORDS_LIST,
      group: 'read',
      target: { kind: 'records', op: 'list' },
      definition: {
        name: RECORDS_LIST,
        title: listTitle,
        description: `${listTitle}. ${copy} Paged: pass the result's \`next\` as \`after\` for the following page.`,
        inputSchema: {
          type: 'object',
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: 'Workflows per page.' },
            after: { type: 'string', minLength: 1, maxLength: 2000, description: 'The `next` of the previous page.' },
          },
          additionalProperties: false,
        },
        outputSchema: {
          type: 'object',
          properties: {
            asOf: AS_OF,
            workflows: { type: 'array', items: RECORD_SCHEMA },
            next: { type: ['string', 'null'], description: 'Pass it as `after` for the next page; null: the last page.' },
          },
          required: ['asOf', 'workflows', 'next'],
        },
        annotations: { title: listTitle, ...ANNOTATIONS },
      },
    },
    {
      name: RECORDS_GET,
      group: 'read',
      target: { kind: 'records', op: 'get' },
      definition: {
        name: RECORDS_GET,
        title: getTitle,
        description: `${getTitle}. ${copy}`,
        inputSchema: {
          type: 'object',
          properties: { workflowId: { type: 'string', minLength: 1, maxLength: 500, description: "The workflow's id." } },
          required: ['workflowId'],
          additionalProperties: false,
        },
        outputSchema: { type: 'object', properties: { asOf: AS_OF, workflow: RECORD_SCHEMA }, required: ['asOf', 'workflow'] },
        annotations: { title: getTitle, ...ANNOTATIONS },
      },
    },
  ];
}

/** Runs the tools over the copy for the session's user, through the records module (RecordsService). */
@Injectable()
export class RecordTools {
  constructor(private readonly records: RecordsService) {}

  async run(session: AgentSession, op: 'list' | 'get', args: Record<string, unknown>): Promise<ToolOutcome> {
    const { tenantId, userId } = session;
    const state = await this.records.copyState(tenantId, userId);
    if (!state.syncing)
      throw new AppError(
        'conflict',
        'This tenant keeps no synced copy of workflows: read them from CWS with facadeListWorkflows or facadeGetWorkflow instead.',
      );
    if (state.lastListedAt === null)
      throw new AppError(
        'conflict',
        "The user's workflows have not been copied yet (their first listing has not completed): read them from CWS with " +
          'facadeListWorkflows or facadeGetWorkflow, or try this tool again in a few minutes.',
      );
    const asOf = state.lastListedAt.toISOString();
    let structured: Record<string, unknown>;
    if (op === 'list') {
      const limit = typeof args.limit === 'number' ? args.limit : DEFAULT_LIMIT;
      const after = typeof args.after === 'string' ? args.after : undefined;
      const page = await this.records.list(tenantId, { userId, limit, after });
      structured = { asOf, workflows: page.items.map(withoutUser), next: page.next };
    } else {
      const record = await this.records.one(tenantId, userId, String(args.workflowId));
      structured = { asOf, workflow: withoutUser(record) };
    }
    return {
      status: 200,
      result: {
        content: [{ type: 'text', text: `As of ${asOf} (the synced copy's last complete listing): ${JSON.stringify(structured)}` }],
        structuredContent: structured,
      },
    };
  }
}

function withoutUser<T extends { userId: string }>(record: T): Omit<T, 'userId'> {
  const { userId: _userId, ...rest } = record;
  return rest;
}
