import type { AgentTool } from './agent-tools.js';

// Tools an agent needs that no single operation gives: written here, beside the generated ones (agent-tools.ts).

/** The workflow's steps in their order of occurrence (docs/upstream.md 3). */
export const WORKFLOW_STEPS = ['Create', 'Review', 'Sign', 'Archive'] as const;
export type WorkflowStep = (typeof WORKFLOW_STEPS)[number];

export const LAUNCH_AND_WAIT = 'launchWorkflowAndWait';

/** How often the workflow is read while waiting. */
export const POLL_INTERVAL_MS = 1000;
export const MAX_WAIT_SECONDS = 300;

/** `outputOf`: the output schema of the tool whose answer this one ends with (facadeGetWorkflow's). */
export function composedTools(outputOf: (name: string) => Record<string, unknown> | undefined): AgentTool[] {
  const title = 'Launch a workflow and wait until it reaches a step';
  return [
    {
      name: LAUNCH_AND_WAIT,
      group: 'write',
      target: { kind: 'composed', name: LAUNCH_AND_WAIT },
      definition: {
        name: LAUNCH_AND_WAIT,
        title,
        description:
          `${title}. Launches it as facadeLaunchWorkflow does (the session's user is its creator; documents may be given as ` +
          "publicly reachable hosted URLs in the body, with the upstream's own field names), then reads it every second until " +
          'it is at `untilStep` or past it, or `timeoutSeconds` pass. Sends progress notifications when the call carries a ' +
          'progress token. The result is the workflow as last read.',
        inputSchema: {
          type: 'object',
          properties: {
            body: {
              type: 'object',
              additionalProperties: true,
              description: "The launch's JSON body, passed to the upstream unchanged (the fields of POST /workflows).",
            },
            untilStep: { type: 'string', enum: [...WORKFLOW_STEPS], description: 'The step to wait for.' },
            timeoutSeconds: {
              type: 'integer',
              minimum: 1,
              maximum: MAX_WAIT_SECONDS,
              default: 60,
              description: 'How long to wait at most.',
            },
          },
          required: ['body', 'untilStep'],
          additionalProperties: false,
        },
        ...(outputOf('facadeGetWorkflow') ? { outputSchema: outputOf('facadeGetWorkflow') } : {}),
        annotations: { title, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      },
    },
  ];
}

/** Whether a workflow at `step` is at or past `target`; unknown steps are not. */
export function reached(step: unknown, target: WorkflowStep): boolean {
  const at = WORKFLOW_STEPS.indexOf(step as WorkflowStep);
  return at >= 0 && at >= WORKFLOW_STEPS.indexOf(target);
}
